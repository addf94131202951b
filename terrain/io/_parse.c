/* Parsing the data rows of an ESRI/GRASS ASCII grid: the CPU parser (terrain/io/_parse.py loads
 * it through ctypes; _parse.cu holds its CUDA twin, per token instead of per row).
 *
 * Plain C99 with no dependency beyond the C library (memchr, memcpy; no Python.h), so that the
 * same file builds into the wheel at install (setup.py) and, in a checkout, on first use
 * into a cache (_parse.py). ctypes releases the GIL around every call, so threads parse
 * row blocks of one file in parallel.
 *
 * Numbers are parsed the way GDAL's ASCII readers do it (strtod to a double, then a cast to
 * float32), bit for bit, with Clinger's exact fast path: a decimal significand m <= 2^53 (an
 * exact double) and a power of ten |e| <= 22 (an exact double too) give m * 10^e or m / 10^-e,
 * one IEEE operation and therefore the correctly rounded double that strtod returns. That
 * covers every token with at most 15 significant digits. Other tokens (more digits, huge
 * exponents) get the float32 bits SLOW_BITS (a NaN with a payload) and are counted; the caller
 * re-parses those with Python's float (also correctly rounded). The build must keep IEEE double
 * semantics: no -ffast-math, and -ffp-contract=off (the fast path is one operation anyway).
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PARSE_OK 0
#define PARSE_BAD_TOKEN 1
#define PARSE_ROW_LENGTH 2

#define NAN_BITS 0x7FC00000u
#define SLOW_BITS 0x7FC0DEADu   /* never the canonical NaN of nodata */
#define MAX_DIGITS 19           /* digits that always fit a uint64 significand */
#define EXACT 9007199254740992ULL /* 2^53 */

#ifndef TERRAIN_PARSE_SOURCE
#define TERRAIN_PARSE_SOURCE "" /* the builder passes a digest of this file and its flags */
#endif

/* What this library was built from: _parse.py loads it only when that is the _parse.c beside it. */
const char *terrain_parse_source(void) { return TERRAIN_PARSE_SOURCE; }

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}; /* all exact */

/* space, \t, \n, \v, \f, \r: what strtod-based readers skip */
static inline int is_space(unsigned int c) { return c == 32u || c - 9u <= 4u; }

static inline float bits_to_float(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* What a parse counts on the way: cells marked SLOW_BITS, NaN (nodata) cells, min and max of
 * the others (ties: the first seen kept, as terrain_nan_min_max does). */
typedef struct {
    int64_t n_slow, n_nan;
    double lo, hi;
} tally;

/* One row, text[0:n): parse its tokens into orow (ncols values). text[n - 1] is whitespace, so
 * the token loops stop without bounds checks. Returns the status; on PARSE_BAD_TOKEN *col is the
 * token's column and [*t0, *t1) its span in text; on PARSE_ROW_LENGTH *col the values found. */
static int parse_row(const uint8_t *text, int64_t n, int64_t ncols, float *orow, float nodata,
                     int has_nodata, int star_is_nodata, int64_t *col_out, int64_t *t0_out,
                     int64_t *t1_out, tally *sums) {
    const float nan32 = bits_to_float(NAN_BITS);
    const float slow32 = bits_to_float(SLOW_BITS);
    int64_t p = 0, col = 0, n_slow = sums->n_slow, n_nan = sums->n_nan;
    double lo = sums->lo, hi = sums->hi;
    int status = PARSE_OK;
    for (;;) {
        while (p < n && is_space(text[p])) ++p;
        if (p >= n) break;
        const int64_t t0 = p;
        const int neg = text[p] == '-';
        if (neg || text[p] == '+') ++p;
        uint64_t mant = 0;
        int nd = 0;           /* digits folded into mant (leading zeros included) */
        int64_t e10 = 0;      /* power of ten of mant's last digit */
        int exact = 1;        /* every nonzero digit made it into mant */
        int64_t n_digits = 0;
        unsigned int d;
        /* integer part, then fraction; the whitespace ending the row stops both loops */
        while ((d = (unsigned int)text[p] - '0') <= 9u) {
            if (nd < MAX_DIGITS) {
                mant = mant * 10u + d;
                ++nd;
            } else {          /* beyond uint64: only zeros keep the value exact */
                ++e10;
                exact &= d == 0;
            }
            ++n_digits;
            ++p;
        }
        if (text[p] == '.') {
            ++p;
            while ((d = (unsigned int)text[p] - '0') <= 9u) {
                if (nd < MAX_DIGITS) {
                    mant = mant * 10u + d;
                    ++nd;
                    --e10;
                } else {
                    exact &= d == 0;
                }
                ++n_digits;
                ++p;
            }
        }
        int ok = n_digits > 0;
        if (ok && (text[p] == 'e' || text[p] == 'E')) {
            ++p;
            int eneg = 0;
            if (text[p] == '-' || text[p] == '+') {
                eneg = text[p] == '-';
                ++p;
            }
            int64_t ex = 0, n_exp = 0;
            while (text[p] >= '0' && text[p] <= '9') {
                if (ex < 100000) ex = ex * 10 + (int64_t)text[p] - '0';
                ++n_exp;
                ++p;
            }
            ok = n_exp > 0;
            e10 += eneg ? -ex : ex;
        }
        if (!ok || !is_space(text[p])) {
            while (p < n && !is_space(text[p])) ++p;
            if (star_is_nodata && p - t0 == 1 && text[t0] == '*') { /* GRASS '*' */
                if (col < ncols) {
                    orow[col] = nan32;
                    ++n_nan;
                }
                ++col;
                continue;
            }
            *t0_out = t0;
            *t1_out = p;
            status = PARSE_BAD_TOKEN;
            break;
        }
        if (col < ncols) {
            double v;
            if (mant == 0 && exact) { /* a nonzero digit past MAX_DIGITS: not zero */
                v = neg ? -0.0 : 0.0;
            } else {
                while (mant > EXACT && mant % 10u == 0) { /* trailing zeros */
                    mant /= 10u;
                    ++e10;
                }
                if (!exact || mant > EXACT || e10 < -22 || e10 > 22) {
                    orow[col] = slow32;
                    ++n_slow;
                    ++col;
                    continue;
                }
                v = (double)mant;
                v = e10 >= 0 ? v * POW10[e10] : v / POW10[-e10];
                if (neg) v = -v;
            }
            const float f = (float)v;
            if (has_nodata && f == nodata) {
                orow[col] = nan32;
                ++n_nan;
            } else {
                orow[col] = f;
                const double d = (double)f;
                if (d < lo) lo = d;
                if (d > hi) hi = d;
            }
        }
        ++col;
    }
    sums->n_slow = n_slow;
    sums->n_nan = n_nan;
    sums->lo = lo;
    sums->hi = hi;
    *col_out = col;
    if (status == PARSE_OK && col != ncols) status = PARSE_ROW_LENGTH;
    return status;
}

/* Parse rows into out (float32, n_rows rows of ncols values, row r at out + r * out_stride).
 *
 * Row r is buf[starts[r]:starts[r + 1]] (its newline included); nothing outside those spans is
 * read. Values: NaN for nodata (== nodata after the float32 cast, or '*' when star_is_nodata);
 * SLOW_BITS for the cells the caller finishes. Returns PARSE_OK, PARSE_BAD_TOKEN or
 * PARSE_ROW_LENGTH (-1: out of memory); result[0..4] = row, count (the token's column, or the
 * values the row holds), token start and end (offsets in buf), cells marked SLOW_BITS;
 * result[5] = NaN cells and minmax[0..1] = min and max of the others, as terrain_nan_min_max
 * gives them for out -- valid when no cell is marked SLOW_BITS. */
int terrain_parse_rows(const uint8_t *buf, const int64_t *starts, int64_t n_rows, int64_t ncols,
                       float *out, int64_t out_stride, float nodata, int has_nodata,
                       int star_is_nodata, int64_t *result, double *minmax) {
    const double inf = (double)bits_to_float(0x7F800000u);
    tally sums = {0, 0, inf, -inf};
    int64_t col = 0, t0 = 0, t1 = 0, r = 0;
    int status = PARSE_OK;
    for (; r < n_rows; ++r) {
        const uint8_t *text = buf + starts[r];
        const int64_t n = starts[r + 1] - starts[r];
        if (n == 0 || is_space(text[n - 1])) {
            status = parse_row(text, n, ncols, out + r * out_stride, nodata, has_nodata,
                               star_is_nodata, &col, &t0, &t1, &sums);
        } else { /* the file's last line, without a newline: a copy ending in one */
            uint8_t *copy = malloc((size_t)n + 1);
            if (copy == NULL) return -1;
            memcpy(copy, text, (size_t)n);
            copy[n] = '\n';
            status = parse_row(copy, n + 1, ncols, out + r * out_stride, nodata, has_nodata,
                               star_is_nodata, &col, &t0, &t1, &sums);
            free(copy);
        }
        if (status != PARSE_OK) break;
    }
    if (status == PARSE_OK) {
        result[0] = result[1] = result[2] = result[3] = 0;
    } else {
        result[0] = r;
        result[1] = col;
        result[2] = starts[r] + t0;
        result[3] = starts[r] + t1;
    }
    result[4] = sums.n_slow;
    result[5] = sums.n_nan;
    minmax[0] = sums.lo;
    minmax[1] = sums.hi;
    return status;
}

/* Offsets (plus base) just after each '\n' in buf[0:n], in order: the first cap of them into out.
 * Returns how many there are (more than cap: call again with a larger out). */
int64_t terrain_newlines(const uint8_t *buf, int64_t n, int64_t base, int64_t *out,
                         int64_t cap) {
    int64_t k = 0;
    const uint8_t *p = buf, *end = buf + n;
    while (p < end) {
        const uint8_t *q = memchr(p, '\n', (size_t)(end - p));
        if (q == NULL) break;
        if (k < cap) out[k] = base + (q - buf) + 1;
        ++k;
        p = q + 1;
    }
    return k;
}

/* NaN count, min and max (NaN ignored; +inf, -inf when every value is NaN) of a float32 array
 * of rows x cols, row r at z + r * stride. On ties the first value seen is kept (so -0.0 and 0.0
 * come out as in a left-to-right Python min/max). */
void terrain_nan_min_max(const float *z, int64_t rows, int64_t cols, int64_t stride,
                         int64_t *n_nan, double *lo_out, double *hi_out) {
    int64_t nan_count = 0;
    double lo = (double)bits_to_float(0x7F800000u), hi = -lo;
    for (int64_t i = 0; i < rows; ++i) {
        const float *row = z + i * stride;
        for (int64_t j = 0; j < cols; ++j) {
            const float v = row[j];
            if (v != v) {
                ++nan_count;
            } else {
                const double d = (double)v;
                if (d < lo) lo = d;
                if (d > hi) hi = d;
            }
        }
    }
    *n_nan = nan_count;
    *lo_out = lo;
    *hi_out = hi;
}
