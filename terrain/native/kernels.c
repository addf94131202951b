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

#include <math.h>
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

/* What this library was built from: terrain.native loads it only when that is the kernels.c beside it. */
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
 * the others (ties: the first seen kept, as terrain_nan_min_max does); the row being parsed and
 * the first cell (row * ncols + col) holding an integer that float32 rounds, -1 while none. */
typedef struct {
    int64_t n_slow, n_nan;
    double lo, hi;
    int64_t row, rounded;
} tally;

/* GDAL's test of a float32 cell against a float32 nodata (ARE_REAL_EQUAL of gdal_priv.h, in
 * float arithmetic): equal, or within 2^-22 of their sum, about 4 units in the last place */
static inline int gdal_nodata_equal(float f, float nodata) {
    return f == nodata || fabsf(f - nodata) < 1.1920928955078125e-7f * fabsf(f + nodata) * 2.0f;
}

/* "nan", "NaN", "-nan", ...: a NaN, which GDAL's ASCII grid reader reads as one */
static inline int is_nan_token(const uint8_t *t, int64_t len) {
    if (len == 4 && (t[0] == '-' || t[0] == '+')) {
        ++t;
        --len;
    }
    return len == 3 && (t[0] | 32) == 'n' && (t[1] | 32) == 'a' && (t[2] | 32) == 'n';
}

/* One row, text[0:n): parse its tokens into orow (ncols values). text[n - 1] is whitespace, so
 * the token loops stop without bounds checks. Returns the status; on PARSE_BAD_TOKEN *col is the
 * token's column and [*t0, *t1) its span in text; on PARSE_ROW_LENGTH *col the values found. */
static int parse_row(const uint8_t *text, int64_t n, int64_t ncols, float *orow, double nodata,
                     int has_nodata, int star_is_nodata, int64_t *col_out, int64_t *t0_out,
                     int64_t *t1_out, tally *sums) {
    const float nan32 = bits_to_float(NAN_BITS);
    const float slow32 = bits_to_float(SLOW_BITS);
    const float nodata32 = (float)nodata;
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
        int integral = 1;     /* no point, no exponent: an Int32 cell for GDAL */
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
            integral = 0;
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
            integral = 0;
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
            if ((star_is_nodata && p - t0 == 1 && text[t0] == '*') || /* GRASS '*' */
                is_nan_token(text + t0, p - t0)) { /* "nan" as GDAL reads it: nodata */
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
            /* an integer is nodata when it is the nodata (GDAL reads a grid of integers as
               Int32), another number when its float32 is GDAL's float32 nodata */
            if (has_nodata && (integral ? v == nodata : gdal_nodata_equal(f, nodata32))) {
                orow[col] = nan32;
                ++n_nan;
            } else {
                if (integral && (double)f != v && sums->rounded < 0) {
                    sums->rounded = sums->row * ncols + col;
                }
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
 * read. Values: NaN for nodata (an integer token equal to nodata, another number whose float32
 * GDAL's float32 nodata test takes, '*' when star_is_nodata); SLOW_BITS for the cells the caller
 * finishes. Returns PARSE_OK, PARSE_BAD_TOKEN or PARSE_ROW_LENGTH (-1: out of memory);
 * result[0..4] = row, count (the token's column, or the values the row holds), token start and
 * end (offsets in buf), cells marked SLOW_BITS; result[5] = NaN cells and minmax[0..1] = min and
 * max of the others, as terrain_nan_min_max gives them for out -- valid when no cell is marked
 * SLOW_BITS; result[6] = the first cell (row * ncols + col) of an integer float32 rounds, or -1. */
int terrain_parse_rows(const uint8_t *buf, const int64_t *starts, int64_t n_rows, int64_t ncols,
                       float *out, int64_t out_stride, double nodata, int has_nodata,
                       int star_is_nodata, int64_t *result, double *minmax) {
    const double inf = (double)bits_to_float(0x7F800000u);
    tally sums = {0, 0, inf, -inf, 0, -1};
    int64_t col = 0, t0 = 0, t1 = 0, r = 0;
    int status = PARSE_OK;
    for (; r < n_rows; ++r) {
        const uint8_t *text = buf + starts[r];
        const int64_t n = starts[r + 1] - starts[r];
        sums.row = r;
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
    result[6] = sums.rounded;
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

/* ==========================================================================================
 * Grid minimum spanning forest in core on the CPU (terrain/grid/mst_device.py host_mst): Kruskal
 * over the grid's edges, given as keys order_bits(w) << 32 | id already sorted ascending, so in
 * the (weight, id) order that makes the forest unique. Edge id = 4 * cell + d, d: E=0 (r, c+1),
 * S=1 (r+1, c), SE=2 (r+1, c+1), SW=3 (r+1, c-1); cells < 2^30. Union-find with path halving;
 * parent[0:n] is scratch. Sets bit d of mask[cell] for each forest edge, copies the forest's keys
 * into chosen (in order) and returns their count.
 * ========================================================================================== */

static inline int32_t uf_find(int32_t *parent, int32_t x) {
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

/* join the trees of roots a and b (the lower root stays) */
static inline void uf_union(int32_t *parent, int32_t a, int32_t b) {
    if (a < b) parent[b] = a; else if (b < a) parent[a] = b;
}

int64_t terrain_grid_kruskal(const uint64_t *keys, int64_t m, int64_t n, int64_t cols,
                             int32_t *parent, uint8_t *mask, uint64_t *chosen) {
    const int64_t step[4] = {1, cols, cols + 1, cols - 1};
    int64_t k = 0;
    for (int64_t i = 0; i < n; ++i) parent[i] = (int32_t)i;
    for (int64_t e = 0; e < m && k + 1 < n; ++e) {
        const uint32_t id = (uint32_t)(keys[e] & 0xFFFFFFFFu);
        const int64_t cell = (int64_t)(id >> 2);
        const int d = (int)(id & 3u);
        const int32_t a = uf_find(parent, (int32_t)cell);
        const int32_t b = uf_find(parent, (int32_t)(cell + step[d]));
        if (a == b) continue;
        uf_union(parent, a, b);
        mask[cell] |= (uint8_t)(1u << d);
        chosen[k++] = keys[e];
    }
    return k;
}

/* ==========================================================================================
 * The grid MST's certificate (terrain/verify.py verify_grid_mst), on the mask and the DEM
 * alone: the edges are walked in id order (cell, then d) and never stored, so the checks but
 * the last hold 4 bytes a cell (parent) where edge arrays held 300.
 * terrain_mst_cert_forest: the first set bit that is not an edge of the graph (an unknown
 * direction, off the grid, at a NaN cell, or a diagonal under 4-connectivity), else the first
 * tree edge closing a cycle (tree edges joined in id order), else the first non-tree edge
 * whose ends lie in two trees (the graph's components are then counted). out: [code (0 ok,
 * 1 stray bit, 2 cycle, 3 two trees), cell, bit or d, set bits, vertices, tree edges,
 * components (code 3 only)].
 * terrain_mst_cert_order: the cycle property, as a sweep of the graph's edges in (weight, id)
 * order (keys as terrain_grid_kruskal's, sorted): tree edges join their ends; the first
 * non-tree edge whose ends are not yet joined is lighter than the tree edge that joins them
 * later, the heaviest on its tree path. out: [that non-tree edge's id, the tree edge's id],
 * or -1s. Cells < 2^30 (32-bit edge ids).
 * ========================================================================================== */

/* the first fault: its code, cell and bit (direction) */
static inline void cert_fault(int64_t *out, int64_t code, int64_t cell, int d) {
    out[0] = code;
    out[1] = cell;
    out[2] = d;
}

/* the other end of edge (cell, d) when it is an edge of the graph, else -1 */
static inline int64_t cert_edge_end(const float *z, int64_t rows, int64_t cols, int conn,
                                    int64_t cell, int d) {
    static const int DR[4] = {0, 1, 1, 1}, DC[4] = {1, 0, 1, -1};
    if (d >= (conn == 4 ? 2 : 4)) return -1;
    const int64_t r = cell / cols + DR[d], c = cell % cols + DC[d];
    if (r >= rows || c < 0 || c >= cols) return -1;
    const int64_t v = r * cols + c;
    return z[cell] == z[cell] && z[v] == z[v] ? v : -1;
}

void terrain_mst_cert_forest(const float *z, const uint8_t *mask, int64_t rows, int64_t cols,
                             int conn, int32_t *parent, int64_t *out) {
    const int64_t n = rows * cols;
    for (int k = 0; k < 7; ++k) out[k] = 0;
    for (int64_t cell = 0; cell < n; ++cell) {
        const int m = mask[cell];
        out[3] += __builtin_popcount((unsigned)m);
        if (z[cell] == z[cell]) ++out[4];
        if (out[0] != 0 || m == 0) continue;
        for (int d = 7; d >= 0; --d) /* the highest stray bit names the cell's fault */
            if ((m >> d) & 1 && (d >= 4 || cert_edge_end(z, rows, cols, conn, cell, d) < 0)) {
                cert_fault(out, 1, cell, d);
                break;
            }
    }
    if (out[0] != 0) return;
    for (int64_t i = 0; i < n; ++i) parent[i] = (int32_t)i;
    for (int64_t cell = 0; cell < n; ++cell)
        for (int d = 0; d < 4; ++d) {
            if (!((mask[cell] >> d) & 1)) continue;
            const int32_t a = uf_find(parent, (int32_t)cell);
            const int32_t b = uf_find(parent, (int32_t)cert_edge_end(z, rows, cols, conn, cell, d));
            if (a == b) {
                cert_fault(out, 2, cell, d);
                return;
            }
            uf_union(parent, a, b);
            ++out[5];
        }
    /* the first non-tree edge between two trees is the fault; joining the ends of every such
     * edge onto the forest's trees leaves the graph's components (trees - joins) */
    int64_t joins = 0;
    for (int64_t cell = 0; cell < n; ++cell)
        for (int d = 0; d < 4; ++d) {
            if ((mask[cell] >> d) & 1) continue;
            const int64_t v = cert_edge_end(z, rows, cols, conn, cell, d);
            if (v < 0) continue;
            const int32_t a = uf_find(parent, (int32_t)cell), b = uf_find(parent, (int32_t)v);
            if (a == b) continue;
            if (out[0] == 0) cert_fault(out, 3, cell, d);
            uf_union(parent, a, b);
            ++joins;
        }
    if (out[0] == 3) out[6] = out[4] - out[5] - joins;
}

void terrain_mst_cert_order(const uint64_t *keys, int64_t m, const uint8_t *mask, int64_t n,
                            int64_t cols, int32_t *parent, int64_t *out) {
    const int64_t step[4] = {1, cols, cols + 1, cols - 1};
    int32_t bad_a = -1, bad_b = -1;
    out[0] = out[1] = -1;
    for (int64_t i = 0; i < n; ++i) parent[i] = (int32_t)i;
    for (int64_t e = 0; e < m; ++e) {
        const uint32_t id = (uint32_t)(keys[e] & 0xFFFFFFFFu);
        const int64_t cell = (int64_t)(id >> 2);
        const int d = (int)(id & 3u);
        const int32_t a = uf_find(parent, (int32_t)cell);
        const int32_t b = uf_find(parent, (int32_t)(cell + step[d]));
        if ((mask[cell] >> d) & 1) {
            uf_union(parent, a, b);
            if (out[0] >= 0 && uf_find(parent, bad_a) == uf_find(parent, bad_b)) {
                out[1] = id;
                return;
            }
        } else if (a != b && out[0] < 0) {
            out[0] = id;
            bad_a = (int32_t)cell;
            bad_b = (int32_t)(cell + step[d]);
        }
    }
}

/* ==========================================================================================
 * The other certificates' passes (terrain/verify.py): each returns the first violation's code
 * in row-major (vertex) order, 0 when none, and the cell (vertex) it names; the sentences are
 * the Python's. Neighbours in ESRI code order (NB_DR, NB_DC below; q = 0, step, ... < 8).
 * ========================================================================================== */

/* the neighbours in ESRI code order (terrain/hydrology/_neighbours.py): E, SE, S, SW, W, NW, N,
   NE, neighbour k with code 1 << k */
static const int NB_DR[8] = {0, 1, 1, 1, 0, -1, -1, -1};
static const int NB_DC[8] = {1, 1, 0, -1, -1, -1, 0, 1};

/* verify_flow's direction checks (the codes of _FLOW_WHY): ESRI codes, 255 exactly at nodata,
 * none climbs, the steepest descent (distance-weighted drop, the first in code order on ties)
 * or, without a lower neighbour, within the flat; 0 exactly at the outlets (the named ones,
 * else edge_outlets: cells beside the grid's edge or nodata without a lower neighbour) and
 * at the sinks of cells cut_off from every named outlet. */
int64_t terrain_cert_flow(const float *z, const uint8_t *d, const uint8_t *outl,
                          const uint8_t *cut_off, int has_out, int edge_outlets, int step,
                          const double *dist, int64_t R, int64_t C, int64_t *cell) {
    for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c) {
            const int64_t i = r * C + c;
            const int v = d[i], nan = z[i] != z[i];
            *cell = i;
            if (v == 255 || nan) {
                if (!(v == 255 && nan)) return 2;
                continue;
            }
            int k = -1;
            if (v != 0) {
                for (int q = 0; q < 8; ++q)
                    if (v == (1 << q)) k = q;
                if (k < 0) return 1;
                if (step == 2 && k % 2 == 1) return 9;
            }
            double best = 0.0;
            int bk = -1, boundary = 0;
            for (int q = 0; q < 8; q += step) {
                const int64_t rr = r + NB_DR[q], cc = c + NB_DC[q];
                if (rr < 0 || rr >= R || cc < 0 || cc >= C || z[rr * C + cc] != z[rr * C + cc]) {
                    boundary = 1;
                    continue;
                }
                const double drop = ((double)z[i] - (double)z[rr * C + cc]) / dist[q];
                if (drop > best) {
                    best = drop;
                    bk = q;
                }
            }
            const int must_out = (has_out && outl[i] != 0) || (edge_outlets && boundary && bk < 0);
            if (v == 0) {
                /* a sink where nodata cuts the cell off from every named outlet drains
                 * nowhere: no lower neighbour, and no outlet to reach */
                if (!must_out && !(cut_off[i] && bk < 0)) return 7;
                continue;
            }
            if (must_out) return 8;
            const int64_t rr = r + NB_DR[k], cc = c + NB_DC[k];
            if (rr < 0 || rr >= R || cc < 0 || cc >= C || z[rr * C + cc] != z[rr * C + cc])
                return 3;
            const float zd = z[rr * C + cc];
            if (zd > z[i]) return 4;
            if (bk >= 0 && k != bk) return 5;
            if (bk < 0 && zd != z[i]) return 6;
        }
    *cell = -1;
    return 0;
}

/* verify_flow's accumulation: NaN exactly at nodata (12), else the cell's weight (w; NaN
 * counts 0) or 1 plus its inflows, summed in code order, equal bits (rtol 0) or within rtol
 * (11). */
int64_t terrain_cert_accumulation(const uint8_t *d, const double *acc, const double *w,
                                  int has_w, double rtol, int64_t R, int64_t C, int64_t *cell) {
    for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c) {
            const int64_t i = r * C + c;
            *cell = i;
            if (d[i] == 255) {
                if (acc[i] == acc[i]) return 12;
                continue;
            }
            double s = has_w ? (w[i] == w[i] ? w[i] : 0.0) : 1.0;
            for (int q = 0; q < 8; ++q) {
                const int64_t rr = r + NB_DR[q], cc = c + NB_DC[q];
                if (rr >= 0 && rr < R && cc >= 0 && cc < C && d[rr * C + cc] == (1 << ((q + 4) & 7)))
                    s += acc[rr * C + cc];
            }
            const double a = acc[i];
            if (a != a) return 12;
            if (rtol == 0.0 ? a != s : fabs(a - s) > rtol * fmax(fabs(a), fabs(s))) return 11;
        }
    *cell = -1;
    return 0;
}

/* verify_fill's local checks: 1 a cell lowered, 2 an outlet changed, 5 a cell cut off from
 * every outlet changed, 3 a cell not at its spill level max(z, lowest neighbour's f), or with
 * strict (the epsilon fill) 4 a cell without a neighbour lower than it. */
int64_t terrain_cert_fill_local(const float *z, const float *f, const uint8_t *outlet,
                                const uint8_t *cut_off, int step, int strict, int64_t H,
                                int64_t W, int64_t *cell) {
    for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j) {
            const int64_t c = i * W + j;
            const float zc = z[c], fc = f[c];
            *cell = c;
            if (zc != zc) continue;
            if (!(fc >= zc)) return 1;
            if (outlet[c] || cut_off[c]) {
                if (fc != zc) return outlet[c] ? 2 : 5;
                continue;
            }
            float low = INFINITY;
            for (int k = 0; k < 8; k += step) {
                const int64_t ii = i + NB_DR[k], jj = j + NB_DC[k];
                if (ii >= 0 && ii < H && jj >= 0 && jj < W && z[ii * W + jj] == z[ii * W + jj] &&
                    f[ii * W + jj] < low)
                    low = f[ii * W + jj];
            }
            if (strict ? !(low < fc) : fc != (zc >= low ? zc : low)) return strict ? 4 : 3;
        }
    *cell = -1;
    return 0;
}

/* room for one more entry in the int64 stack *buf of *cap entries holding top: doubled when
 * full; 0, or -1 out of memory (*buf kept) */
static inline int stack_room(int64_t **buf, int64_t *cap, int64_t top) {
    if (top < *cap) return 0;
    int64_t *grown = realloc(*buf, (size_t)(2 * *cap) * sizeof **buf);
    if (grown == NULL) return -1;
    *buf = grown;
    *cap *= 2;
    return 0;
}

/* verify_fill's drainage: seen = 1 at the valid cells with a path to an outlet on which f
 * never rises, searched upwards from the outlets (a stack that grows as it needs). 0, or -1
 * when memory runs out. */
int64_t terrain_cert_drains(const float *z, const float *f, const uint8_t *outlet, int step,
                            int64_t H, int64_t W, uint8_t *seen) {
    int64_t cap = 1 << 16, top = 0;
    int64_t *stack = malloc((size_t)cap * sizeof *stack);
    if (stack == NULL) return -1;
    memset(seen, 0, (size_t)(H * W));
#define CERT_PUSH(X)                                                                           \
    {                                                                                          \
        if (stack_room(&stack, &cap, top)) { free(stack); return -1; }                         \
        seen[X] = 1;                                                                           \
        stack[top++] = (X);                                                                    \
    }
    for (int64_t c = 0; c < H * W; ++c)
        if (outlet[c] && z[c] == z[c]) CERT_PUSH(c)
    while (top > 0) {
        const int64_t c = stack[--top], i = c / W, j = c % W;
        for (int k = 0; k < 8; k += step) {
            const int64_t ii = i + NB_DR[k], jj = j + NB_DC[k], u = ii * W + jj;
            if (ii >= 0 && ii < H && jj >= 0 && jj < W && !seen[u] && z[u] == z[u] &&
                f[u] >= f[c])
                CERT_PUSH(u)
        }
    }
#undef CERT_PUSH
    free(stack);
    return 0;
}

/* verify_sssp: 1 an arc relaxes (d(v) > d(u) + w beyond tol), 3 an unreached neighbour of a
 * reached vertex, 2 a reached non-source vertex without a tight arc into it (within tol);
 * uv: the arc's ends (u -1 for code 2). Arcs of the CSR (int64), weights w or 1 (unit). */
int64_t terrain_cert_sssp(const int64_t *indptr, const int64_t *indices, const double *w,
                          int unit, const double *dist, const uint8_t *is_source, double tol,
                          int64_t n, int64_t *uv) {
    uint8_t *tight = malloc((size_t)(n > 0 ? n : 1));
    if (tight == NULL) return -1;
    memcpy(tight, is_source, (size_t)n);
    int64_t code = 0;
    for (int64_t x = 0; x < n && code == 0; ++x) {
        const double dx = dist[x];
        if (!isfinite(dx)) continue;
        for (int64_t k = indptr[x]; k < indptr[x + 1]; ++k) {
            const int64_t y = indices[k];
            const double cand = dx + (unit ? 1.0 : w[k]), dy = dist[y];
            const double slack = tol * fmax(1.0, fabs(cand));
            uv[0] = x;
            uv[1] = y;
            if (!isfinite(dy)) { code = 3; break; }
            if (dy > cand + slack) { code = 1; break; }
            if (fabs(dy - cand) <= slack) tight[y] = 1;
        }
    }
    for (int64_t y = 0; y < n && code == 0; ++y)
        if (isfinite(dist[y]) && !tight[y]) {
            uv[0] = -1;
            uv[1] = y;
            code = 2;
        }
    free(tight);
    return code;
}

/* ==========================================================================================
 * The fill's drain pass on the CPU (terrain/hydrology/fill.py _drain_block): on a halo block
 * (H + 2) x (W + 2) of elevations zh and forest bits mh (the grid MST's mask: bit 1 E, 2 S,
 * 4 SE, 8 SW of the owning cell), f[v] = min over the sources s of v's tree of
 * max(path maximum v..s, src[s]); an edge weighs max(z_u, z_v); src inf: no source. Each
 * tree is walked depth first from its first cell (a stack entry carries its parent's walk
 * position and edge weight), then an up and a down pass in walk order. Comparisons of
 * float32 only: the levels are the unique minimax values, the GPU's bit for bit. Returns 0,
 * -1 when the work arrays cannot be allocated, -2 for 2^31 cells or more.
 * ========================================================================================== */


/* bit k set when the forest holds the edge from halo cell p to neighbour k (the W, NW, N and
   NE edges are the neighbours' own bits) */
static inline int forest_dirs(const uint8_t *p, int64_t w2) {
    const int m = p[0];
    return (m & 1) | ((m & 4) >> 1) | ((m & 2) << 1) | (m & 8) | ((p[-1] & 1) << 4) |
           ((p[-w2 - 1] & 4) << 3) | ((p[-w2] & 2) << 5) | ((p[-w2 + 1] & 8) << 4);
}

int64_t terrain_drain_grid(const float *zh, const uint8_t *mh, const float *src, int64_t H,
                           int64_t W, float *f) {
    const int64_t n = H * W, w2 = W + 2;
    if (n <= 0) return 0;
    if (n >= ((int64_t)1 << 31)) return -2;
    uint8_t *seen = calloc((size_t)n, 1);
    int32_t *order = malloc((size_t)n * 4), *ppos = malloc((size_t)n * 4);
    int32_t *stack = malloc((size_t)n * 4), *stack_p = malloc((size_t)n * 4);
    float *pw = malloc((size_t)n * 4), *up = malloc((size_t)n * 4);
    float *stack_w = malloc((size_t)n * 4);
    int64_t rc = 0;
    if (!seen || !order || !ppos || !stack || !stack_p || !pw || !up || !stack_w) {
        rc = -1;
        goto done;
    }
    for (int64_t s = 0; s < n; ++s) {
        if (seen[s]) continue;
        seen[s] = 1;
        if (forest_dirs(mh + (s / W + 1) * w2 + s % W + 1, w2) == 0) {
            f[s] = src[s];
            continue;
        }
        int64_t top = 1, tail = 0;
        stack[0] = (int32_t)s;
        stack_p[0] = -1;
        stack_w[0] = 0.0f;
        while (top > 0) {
            --top;
            const int32_t v = stack[top];
            const int64_t pos = tail++;
            order[pos] = v;
            ppos[pos] = stack_p[top];
            pw[pos] = stack_w[top];
            up[pos] = src[v];
            const int64_t i = v / W, j = v % W;
            const int b = forest_dirs(mh + (i + 1) * w2 + j + 1, w2);
            const float zv = zh[(i + 1) * w2 + j + 1];
            for (int k = 0; k < 8; ++k) {
                if (!(b & (1 << k))) continue;
                const int64_t ii = i + NB_DR[k], jj = j + NB_DC[k];
                if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
                const int64_t u = ii * W + jj;
                if (seen[u]) continue;
                seen[u] = 1;
                const float zu = zh[(ii + 1) * w2 + jj + 1];
                stack[top] = (int32_t)u;
                stack_p[top] = (int32_t)pos;
                stack_w[top] = zv >= zu ? zv : zu;
                ++top;
            }
        }
        for (int64_t t = tail - 1; t > 0; --t) { /* up: the best source below */
            const float x = up[t] >= pw[t] ? up[t] : pw[t];
            const int32_t p = ppos[t];
            if (x < up[p]) up[p] = x;
        }
        f[order[0]] = up[0];
        for (int64_t t = 1; t < tail; ++t) { /* down: the best over the whole tree */
            float x = up[ppos[t]];
            if (pw[t] > x) x = pw[t];
            if (x < up[t]) up[t] = x;
            f[order[t]] = up[t];
        }
    }
done:
    free(seen);
    free(order);
    free(ppos);
    free(stack);
    free(stack_p);
    free(pw);
    free(up);
    free(stack_w);
    return rc;
}

/* ==========================================================================================
 * The fill's default outlets (terrain/hydrology/fill.py outlet_cells): out = 1 at the valid
 * cells of z (H x W) with a neighbour (4 or 8) outside the grid or NaN, else 0. One pass
 * where NumPy's padded copy and eight shifted masks allocated ten times the grid's bytes.
 * ========================================================================================== */

void terrain_outlet_cells(const float *z, int64_t H, int64_t W, int connectivity,
                          uint8_t *out, int64_t i0, int64_t i1) { /* rows i0 <= i < i1 */
    const int step = connectivity == 8 ? 1 : 2;
    for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = 0; j < W; ++j) {
            const float v = z[i * W + j];
            int edge = 0;
            if (v == v) {
                if (i == 0 || j == 0 || i == H - 1 || j == W - 1) {
                    edge = 1;
                } else {
                    for (int k = 0; k < 8 && !edge; k += step) {
                        const float u = z[(i + NB_DR[k]) * W + j + NB_DC[k]];
                        edge = u != u;
                    }
                }
            }
            out[i * W + j] = (uint8_t)edge;
        }
}

/* ==========================================================================================
 * The fill's layers on the host from its levels (terrain/hydrology/fill.py _host_layers), n
 * cells: filled (in place of the levels), depth = filled - z, flooded = filled > z, and
 * counts[0..2] = valid, flooded and undrained cells, *max_depth the deepest (0 with no valid
 * cell). A cell not raised (its level z, or inf: undrained) keeps z's bits, a raised one
 * its level with +0.0 for a zero: which zero a level equal to z carries is the order of
 * equal elevations in the flood or the forest, so no route's bits depend on it (depth then
 * +0.0 wherever nothing floods). One pass where NumPy's took ten.
 * ========================================================================================== */

void terrain_fill_layers(const float *z, float *filled, int64_t n, float *depth,
                         uint8_t *flooded, int64_t *counts, float *max_depth) {
    int64_t valid = 0, wet = 0, undrained = 0;
    float deepest = 0.0f;
    for (int64_t t = 0; t < n; ++t) {
        const float zv = z[t], fv = filled[t];
        const int inf = fv == INFINITY, nan = zv != zv;
        float level = inf ? zv : fv;
        const int up = level > zv;
        /* a zero level: z's zero where not raised, +0.0 where raised. A branch taken at zero
           levels only (a mask over every cell made the pass 1.5 times as long) */
        if (level == 0.0f) level = up ? 0.0f : zv;
        const float d = level - zv;
        filled[t] = level;
        depth[t] = d;
        flooded[t] = (uint8_t)up;
        valid += !nan;
        wet += up;
        undrained += inf & !nan;
        if (d > deepest) deepest = d;
    }
    counts[0] = valid;
    counts[1] = wet;
    counts[2] = undrained;
    *max_depth = deepest;
}

/* ==========================================================================================
 * Flow directions and accumulation on the CPU (terrain/hydrology/_flow_cpu.py, the twins of
 * terrain/hydrology/_flow.cu): each works on a padded block (R x C, a window with a halo, NaN
 * / 255 outside the grid), so the in-core and tiled runs execute the same code. Neighbour k
 * of NB_DR/NB_DC has ESRI code 1 << k; D4 (step 2) takes the even k. Distances are int32
 * with FLOW_INF unreached; codes 255 nodata, 0 outlet, FLOW_FLAT unresolved. Each polls
 * *stop (row by row, and every 65536 cells of a queue) and returns -3 once it is set.
 * ========================================================================================== */

#define FLOW_FLAT 254
#define FLOW_INF 2147483647

/* k of code 1 << k, -1 for any other code */
static inline int flow_code_k(unsigned v) { return v && !(v & (v - 1)) ? __builtin_ctz(v) : -1; }

/* Codes of the cells inside the outer ring of zp: 255 nodata, 0 outlet (outp given and
   non-zero, or no lower neighbour beside the grid's edge/nodata with edge_outlets), 1 << k the
   steepest drop (z - z_k) / dist[k] (ties: the lowest k), else FLOW_FLAT. Returns 0. */
int64_t terrain_flow_classify(const float *zp, const uint8_t *outp, int edge_outlets,
                              const double *dist, int step, int64_t R, int64_t C, uint8_t *code,
                              const volatile uint8_t *stop) {
    /* A row at a time, a neighbour at a time along the row: per cell the same drops in the
       same order (only a strictly steeper one replaces, so ties keep the lowest k; a NaN
       neighbour's drop is NaN, never steeper; a quiet comparison, which the compiler
       vectorises under strict floating point): 2052² in 39 ms, where a cell at a time, its
       neighbours in a loop with branches, took 70 ms (2-core VM). Returns 0, -1 out of
       memory. */
    const int64_t W = C - 2;
    int64_t rc = 0;
    if (W <= 0) return 0;
    double *best = malloc((size_t)W * sizeof *best);
    int32_t *bk = malloc((size_t)W * sizeof *bk);
    uint8_t *boundary = malloc((size_t)W);
    if (best == NULL || bk == NULL || boundary == NULL) {
        rc = -1;
        goto done;
    }
    for (int64_t r = 1; r < R - 1; ++r) {
        if (*stop) {
            rc = -3;
            goto done;
        }
        const float *zr = zp + r * C + 1;
        for (int64_t i = 0; i < W; ++i) {
            best[i] = 0.0;
            bk[i] = -1;
            boundary[i] = 0;
        }
        for (int k = 0; k < 8; k += step) {
            const float *zn = zp + (r + NB_DR[k]) * C + 1 + NB_DC[k];
            const double d = dist[k];
            for (int64_t i = 0; i < W; ++i) {
                const float n = zn[i];
                boundary[i] |= (uint8_t)(n != n);
                const double drop = ((double)zr[i] - (double)n) / d;
                const int steeper = isgreater(drop, best[i]);
                best[i] = steeper ? drop : best[i];
                bk[i] = steeper ? k : bk[i];
            }
        }
        uint8_t *out = code + r * C + 1;
        const uint8_t *o = outp == NULL ? NULL : outp + r * C + 1;
        for (int64_t i = 0; i < W; ++i) {
            const float z = zr[i];
            out[i] = z != z ? 255
                   : (o != NULL && o[i] != 0) ? 0
                   : bk[i] >= 0 ? (uint8_t)(1u << bk[i])
                   : (edge_outlets && boundary[i]) ? 0 : FLOW_FLAT;
        }
    }
done:
    free(best);
    free(bk);
    free(boundary);
    return rc;
}

typedef struct { int32_t d; int64_t cell, seq; } flow_seed;

static int flow_seed_before(const void *a, const void *b) {
    const flow_seed *x = a, *y = b;
    if (x->d != y->d) return x->d < y->d ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* BFS distances in the interior's flats: away from higher terrain, towards lower (a draining
   cell of the flat's elevation), seeded also by the halo ring's halo_a / halo_t (NULL: none,
   a block that holds its flats whole); FLOW_INF where unreached. The seeds run in the order
   of their distance (ties: row-major), merged with the queue. Not fresh: away / towards
   hold an earlier call's distances with halos no lower than these anywhere, and only the
   halo cells now lower seed (zp unread): the distances are a minimum over seeds, so
   lowering from there gives a fresh call's (a tiled pass run again as its neighbours
   publish). Returns 0, -1 out of memory. */
int64_t terrain_flow_flat_distances(const float *zp, const uint8_t *code, const int32_t *halo_a,
                                    const int32_t *halo_t, int step, int64_t R, int64_t C,
                                    int32_t *away, int32_t *towards, int fresh,
                                    const volatile uint8_t *stop) {
    int64_t rc = 0;
    const int64_t n = R * C;
    int64_t *queue = malloc((size_t)n * sizeof *queue);
    flow_seed *seeds = malloc((size_t)n * sizeof *seeds);
    /* the interior's flat cells, the only ones a step enters: a neighbour is then one
       offset and one load, not a division into row and column and four bounds (the BFS
       of a 2052² block with a fifth of it flat: 88 -> 58 ms, 2-core VM) */
    uint8_t *open = calloc((size_t)n, 1);
    if (queue == NULL || seeds == NULL || open == NULL) {
        free(queue);
        free(seeds);
        free(open);
        return -1;
    }
    int64_t off[8];
    for (int k = 0; k < 8; ++k) off[k] = NB_DR[k] * C + NB_DC[k];
    for (int64_t r = 2; r < R - 2; ++r)
        for (int64_t c = 2; c < C - 2; ++c) open[r * C + c] = code[r * C + c] == FLOW_FLAT;
    for (int which = 0; which < 2; ++which) {
        int32_t *dist = which == 0 ? away : towards;
        const int32_t *halo = which == 0 ? halo_a : halo_t;
        int64_t ns = 0;
        if (fresh)
            for (int64_t t = 0; t < n; ++t) dist[t] = FLOW_INF;
        for (int64_t r = 1; r < R - 1; ++r) {
            if (*stop) {
                rc = -3;
                goto done;
            }
            const int ring = r < 2 || r >= R - 2;
            for (int64_t c = 1; c < C - 1; ++c) {
                if (!fresh && !ring && c == 2) c = C - 2; /* not fresh: the ring only */
                const int64_t v = r * C + c;
                if (code[v] != FLOW_FLAT) continue;
                if (!(r >= 2 && r < R - 2 && c >= 2 && c < C - 2)) { /* the halo ring */
                    if (halo && halo[v] < dist[v]) { /* fresh: dist INF */
                        seeds[ns] = (flow_seed){halo[v], v, ns};
                        dist[v] = halo[v];
                        ++ns;
                    }
                    continue;
                }
                const float z = zp[v];
                for (int k = 0; k < 8; k += step) {
                    const int64_t u = v + NB_DR[k] * C + NB_DC[k];
                    const float zn = zp[u];
                    const uint8_t cn = code[u];
                    if ((which == 0 && zn > z) ||
                        (which == 1 && cn != FLOW_FLAT && cn != 255 && zn == z)) {
                        seeds[ns] = (flow_seed){1, v, ns};
                        dist[v] = 1;
                        ++ns;
                        break;
                    }
                }
            }
        }
        int64_t sorted = 1; /* in core: every seed at 1, in row-major order already */
        for (int64_t t = 1; t < ns && sorted; ++t) sorted = seeds[t - 1].d <= seeds[t].d;
        if (!sorted) qsort(seeds, (size_t)ns, sizeof *seeds, flow_seed_before);
        int64_t head = 0, tail = 0, si = 0;
        for (int64_t taken = 1; si < ns || head < tail; ++taken) {
            int64_t v;
            if ((taken & 0xFFFF) == 0 && *stop) {
                rc = -3;
                goto done;
            }
            if (head < tail && (si >= ns || dist[queue[head]] <= seeds[si].d)) {
                v = queue[head++];
            } else {
                v = seeds[si].cell;
                const int32_t d0 = seeds[si].d;
                ++si;
                if (dist[v] < d0) continue; /* reached earlier by a shorter path: expanded then */
            }
            const int32_t d = dist[v] + 1;
            for (int k = 0; k < 8; k += step) { /* v is in the rings' inside: u in the array */
                const int64_t u = v + off[k];
                if (!open[u] || dist[u] <= d) continue;
                dist[u] = d;
                queue[tail++] = u;
            }
        }
    }
done:
    free(queue);
    free(seeds);
    free(open);
    return rc;
}

/* Barnes et al.'s combined gradient: 2 t + (h - a) (0 for a unreached) */
static inline int64_t flow_mask(int32_t a, int32_t t, int32_t h) {
    return 2 * (int64_t)t + (a < FLOW_INF ? (int64_t)h - a : 0);
}

/* Directions of the interior's flat cells into out: towards the least flow_mask in the flat, a
   drain lowest (ties: cardinal first, then the lowest k); 0 where the flat has no drain.
   height[label]: the whole flat's largest away. Returns 0. */
int64_t terrain_flow_flat_directions(const float *zp, const uint8_t *code, const int32_t *away,
                                     const int32_t *towards, const int32_t *labels,
                                     const int32_t *height, int step, int64_t R, int64_t C,
                                     uint8_t *out, const volatile uint8_t *stop) {
    for (int64_t r = 2; r < R - 2; ++r) {
        if (*stop) return -3;
        for (int64_t c = 2; c < C - 2; ++c) {
            const int64_t v = r * C + c;
            if (code[v] != FLOW_FLAT) continue;
            const int32_t t = towards[v];
            if (t >= FLOW_INF) {
                out[v] = 0;
                continue;
            }
            const int32_t h = height[labels[v]];
            int64_t best = flow_mask(away[v], t, h);
            int bk = -1, bcard = 0;
            for (int k = 0; k < 8; k += step) {
                const int64_t u = v + NB_DR[k] * C + NB_DC[k];
                const uint8_t cn = code[u];
                int64_t m;
                if (cn == FLOW_FLAT)
                    m = flow_mask(away[u], towards[u], h);
                else if (cn != 255 && zp[u] == zp[v])
                    m = -1;
                else
                    continue;
                const int card = k % 2 == 0;
                if (m < best || (m == best && bk >= 0 && card && !bcard)) {
                    best = m;
                    bk = k;
                    bcard = card;
                }
            }
            /* bk >= 0 always: a BFS parent lies lower (Barnes et al., 2014, section 2.4) */
            out[v] = bk < 0 ? 0 : (uint8_t)(1u << bk);
        }
    }
    return 0;
}

/* The outer ring of an R x C block a: src's, or NaN without src. */
static void flow_ring_set(double *a, const double *src, int64_t R, int64_t C) {
    for (int64_t c = 0; c < C; ++c) {
        a[c] = src != NULL ? src[c] : NAN;
        a[(R - 1) * C + c] = src != NULL ? src[(R - 1) * C + c] : NAN;
    }
    for (int64_t r = 1; r < R - 1; ++r) {
        a[r * C] = src != NULL ? src[r * C] : NAN;
        a[r * C + C - 1] = src != NULL ? src[r * C + C - 1] : NAN;
    }
}

/* Accumulation of dp's interior (inflows summed in code order, the halo's from ext; weights:
   (R - 2) rows of w_stride, or NULL for 1 a cell) in Kahn's order, written to order. Returns
   the cells done (fewer than the valid ones: a cycle), -1 out of memory; *err = 1 for a
   direction to nodata or off the grid. */
int64_t terrain_flow_accumulate(const uint8_t *dp, const double *weights, int64_t w_stride,
                                const double *ext, int64_t R, int64_t C, double *acc,
                                int64_t *order, int64_t *err, const volatile uint8_t *stop) {
    const int64_t n = R * C;
    /* no path enters the ring (its inflows are ext's) or nodata: their in-degrees start at a
       count no decrement takes to 0, and while the block runs the ring of acc holds ext's
       (NaN again at the end), so that a cell's inflow is one load and its successor one
       decrement, with no division into row and column (a 4096² block, 2-core VM: 0.51-0.55
       s, 0.78-0.85 s before) */
    enum { NO_ENTRY = 64 };
    uint8_t *indeg = malloc((size_t)n);
    int64_t *stack = malloc((size_t)n * sizeof *stack);
    if (indeg == NULL || stack == NULL) {
        free(indeg);
        free(stack);
        return -1;
    }
    memset(indeg, NO_ENTRY, (size_t)n);
    int64_t off[8];
    uint8_t into[8]; /* the code of a neighbour k that drains into the cell */
    for (int k = 0; k < 8; ++k) {
        off[k] = NB_DR[k] * C + NB_DC[k];
        into[k] = (uint8_t)(1u << ((k + 4) & 7));
    }
    for (int64_t r = 1; r < R - 1; ++r)
        for (int64_t c = 1; c < C - 1; ++c)
            if (dp[r * C + c] != 255) indeg[r * C + c] = 0;
    flow_ring_set(acc, ext, R, C);
    *err = 0;
    for (int64_t r = 1; r < R - 1; ++r)
        for (int64_t c = 1; c < C - 1; ++c) {
            const uint8_t v = dp[r * C + c];
            if (v == 0 || v == 255) continue;
            const int k = flow_code_k(v);
            if (k < 0) {
                *err = 1;
                continue;
            }
            const int64_t u = r * C + c + off[k];
            if (dp[u] == 255)
                *err = 1;
            else
                ++indeg[u];
        }
    int64_t top = 0, done = 0;
    for (int64_t r = 1; r < R - 1; ++r)
        for (int64_t c = 1; c < C - 1; ++c)
            if (indeg[r * C + c] == 0) stack[top++] = r * C + c;
    while (top > 0) {
        if ((done & 0xFFFF) == 0xFFFF && *stop) {
            done = -3;
            break;
        }
        const int64_t v = stack[--top];
        double s = 1.0;
        if (weights != NULL) s = weights[(v / C - 1) * w_stride + v % C - 1];
        for (int k = 0; k < 8; ++k)
            if (dp[v + off[k]] == into[k]) s += acc[v + off[k]];
        acc[v] = s;
        order[done++] = v;
        const int k = flow_code_k(dp[v]);
        if (k < 0) continue; /* an outlet (or a code that is no direction: an error already) */
        if (--indeg[v + off[k]] == 0) stack[top++] = v + off[k];
    }
    flow_ring_set(acc, NULL, R, C);
    free(indeg);
    free(stack);
    return done;
}

/* Each interior cell's out-edge (out_index) leaving the block; -1: ends inside. */
void terrain_flow_exits(const uint8_t *dp, const int64_t *order, int64_t done,
                        const int64_t *out_index, int64_t R, int64_t C, int64_t *exit_) {
    (void)R; /* the blocks' shape, as every flow kernel takes it */
    for (int64_t i = done - 1; i >= 0; --i) {
        const int64_t v = order[i];
        if (out_index[v] >= 0) {
            exit_[v] = out_index[v];
        } else if (dp[v] == 0) {
            exit_[v] = -1;
        } else {
            const int k = flow_code_k(dp[v]);
            exit_[v] = exit_[v + NB_DR[k] * C + NB_DC[k]];
        }
    }
}

/* ---------------------------------------------------------------- Watersheds and stream links
 * (terrain/hydrology/watershed.py) on a whole grid of D8 codes d (R x C, row-major; 0 outlet,
 * 255 nodata). C, not Numba: Numba's import and cache load were most of a `streams` process.
 *
 * ws_down: cell i's downstream cell; -1 at outlets and nodata; -2 for a code that is no
 * direction, or one leading off the grid or to nodata. */
static inline int64_t ws_down(const uint8_t *d, int64_t R, int64_t C, int64_t i) {
    const uint8_t v = d[i];
    if (v == 0 || v == 255) return -1;
    const int k = flow_code_k(v);
    if (k < 0) return -2;
    const int64_t rr = i / C + NB_DR[k], cc = i % C + NB_DC[k];
    if (rr < 0 || rr >= R || cc < 0 || cc >= C || d[rr * C + cc] == 255) return -2;
    return rr * C + cc;
}

/* Watershed labels without a whole-grid order (5 bytes a cell with the codes, where the
 * downstream cells and Kahn's order took 26): each unlabelled cell's path is walked down to
 * an outlet or a labelled cell and labelled on the way back, a cell taking the label of the
 * first seed at or below it (seed_cells ascending, with seed_labels > 0), 0 where its path
 * ends elsewhere, -1 at nodata. Returns 0; 1 with *bad the first cell whose code is no
 * direction or leads off the grid or to nodata; 2 with *bad a cell on a cycle (a walk met
 * its own path); -1 out of memory. */
#define WS_UNSEEN INT32_MIN
#define WS_WALKING (INT32_MIN + 1)
int64_t terrain_ws_basins(const uint8_t *d, int64_t R, int64_t C, const int64_t *seed_cells,
                          const int32_t *seed_labels, int64_t k, int32_t *labels, int64_t *bad) {
    const int64_t n = R * C;
    for (int64_t i = 0; i < n; ++i) {
        labels[i] = d[i] == 255 ? -1 : WS_UNSEEN;
        if (d[i] != 255 && ws_down(d, R, C, i) == -2) {
            *bad = i;
            return 1;
        }
    }
    int64_t cap = 1 << 12;
    int64_t *path = malloc((size_t)cap * sizeof *path);
    if (path == NULL) return -1;
    for (int64_t s = 0; s < n; ++s) {
        if (labels[s] != WS_UNSEEN) continue;
        int64_t top = 0, x = s;
        int32_t cur = 0;
        for (;;) {
            if (labels[x] == WS_WALKING) {
                free(path);
                *bad = x;
                return 2;
            }
            if (labels[x] != WS_UNSEEN) {
                cur = labels[x];
                break;
            }
            if (stack_room(&path, &cap, top)) {
                free(path);
                return -1;
            }
            path[top++] = x;
            labels[x] = WS_WALKING;
            if ((x = ws_down(d, R, C, x)) < 0) break; /* an outlet: cur stays 0 */
        }
        while (top > 0) { /* back up the path: a seed's label from it upwards */
            x = path[--top];
            int64_t lo = 0, hi = k;
            while (lo < hi) {
                const int64_t mid = lo + (hi - lo) / 2;
                if (seed_cells[mid] < x) lo = mid + 1; else hi = mid;
            }
            if (lo < k && seed_cells[lo] == x) cur = seed_labels[lo];
            labels[x] = cur;
        }
    }
    free(path);
    return 0;
}
#undef WS_UNSEEN
#undef WS_WALKING

/* order: the valid cells upstream first (Kahn's order from the cells nothing drains into).
 * Returns their count (fewer than the valid cells: a cycle), -1 out of memory. */
int64_t terrain_ws_topological(const int64_t *down, const uint8_t *valid, int64_t n,
                               int64_t *order) {
    int32_t *indeg = calloc((size_t)(n > 0 ? n : 1), sizeof *indeg);
    if (indeg == NULL) return -1;
    for (int64_t i = 0; i < n; ++i)
        if (down[i] >= 0) ++indeg[down[i]];
    int64_t head = 0, tail = 0;
    for (int64_t i = 0; i < n; ++i)
        if (valid[i] && indeg[i] == 0) order[tail++] = i;
    while (head < tail) {
        const int64_t j = down[order[head++]];
        if (j >= 0 && --indeg[j] == 0) order[tail++] = j;
    }
    free(indeg);
    return tail;
}

/* The Strahler order of every stream cell, upstream first (ins: each one's stream inflows):
 * 1 at a source, else the largest inflowing order, plus one when two or more bring it.
 * Returns 0, -1 out of memory. */
int64_t terrain_ws_strahler(const int64_t *order, int64_t count, const int64_t *down,
                            const uint8_t *stream, const int32_t *ins, int64_t n,
                            int32_t *strahler) {
    int32_t *best = calloc((size_t)(n > 0 ? n : 1), sizeof *best);
    int32_t *many = calloc((size_t)(n > 0 ? n : 1), sizeof *many);
    if (best == NULL || many == NULL) {
        free(best);
        free(many);
        return -1;
    }
    for (int64_t q = 0; q < count; ++q) {
        const int64_t i = order[q];
        if (!stream[i]) continue;
        const int32_t s = ins[i] == 0 ? 1 : best[i] + (many[i] >= 2);
        strahler[i] = s;
        const int64_t j = down[i];
        if (j >= 0 && stream[j]) {
            if (s > best[j]) {
                best[j] = s;
                many[j] = 1;
            } else if (s == best[j]) {
                ++many[j];
            }
        }
    }
    free(best);
    free(many);
    return 0;
}

/* ==========================================================================================
 * The fill's levels on the CPU in core (terrain/hydrology/fill.py _flood_levels): a
 * priority flood of the DEM z (H x W, NaN = nodata) from the outlets (outlet != 0), in
 * nondecreasing level, on the work array fh of (H + 2) x (W + 2) floats (a frame around the
 * grid, so no step checks bounds). A cell reached from a cell of level L gets max(z, L); one
 * at or below L joins the pit stack, drained before the next pop of the queue (Barnes et al.
 * 2014's improved priority flood: most cells of a flooded DEM never enter it). One above L
 * is a slope: its level is its own z, and it joins the slope stack, drained first; a slope
 * none of whose open neighbours lies at or below it is expanded at once, the others enter
 * the queue (Zhou, Sun & Fu 2016's variant). About half the slopes skip the queue on the
 * synthetic DEMs (6.7 M of 12.8 M at 4096²): one core's flood of that DEM took 0.66-0.68 s
 * against 0.75-0.85 s, 16 strips of a 16384² DEM 1.51-1.56 s against 1.67-1.75 s (H200
 * host), the same levels bit for bit; a slope's label is that of the cell it was reached
 * from, below it, so the strips' labels keep their meaning. The queue is a
 * radix heap over the order-preserving uint32 image of the float32 keys (monotone: every key
 * pushed is above the last popped), so a push is O(1) and a cell moves between its 33
 * buckets at most 32 times. At the end the first H x W floats of fh hold the levels,
 * row-major (inf where no outlet is reached: undrained or nodata): the unique minimax values,
 * the drain pass's bits.
 *
 * A strip of a grid cut into row strips (Barnes 2016's parallel priority flood, with strips
 * for tiles): label (H + 2) x (W + 2) int32, else NULL. Bit 1 of seams: the first row borders
 * the strip above, bit 2: the last row the strip below; every valid cell of such a row is a
 * seed at its own elevation with a label of its own (2, 3, ... in row-major order), the
 * outlets label 1, and a cell takes the label of the cell it is reached from. Where two
 * labels a < b meet (adjacent cells, one of them being expanded), the spill max(level,
 * level) is kept, the least per pair, as key a << 32 | b in *spill_keys with its weight in
 * *spill_w (malloc'd, freed with terrain_free; the return value counts them). At the end
 * the first H x W ints of label hold the cells' labels (0: nodata or unreached). The grid's
 * level of a cell is then max(its strip's level, its label's minimax spill level from the
 * outlets' labels over every strip's spills and the seams' pairs): terrain_spill_levels,
 * terrain_flood_raise. Returns the spills kept (0 without labels), -1 out of memory, -2 for
 * 2^31 framed cells or more, -3 when *stop was set (checked every 65536 cells), -4 for an
 * infinite elevation.
 * ========================================================================================== */

#define FLOOD_AHEAD 2

typedef struct { uint64_t *a; int64_t n, cap; } flood_bucket;
typedef struct { int32_t *a; int64_t n, cap; } flood_stack;
/* open addressing, linear probing; key 0 is empty (labels are >= 1) */
typedef struct { uint64_t *key; float *w; int64_t n, cap; } flood_spills;

static inline uint32_t flood_key(float x) {
    uint32_t b;
    memcpy(&b, &x, 4);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

/* append x to the growable array s (doubling from first): 0, or -1 out of memory */
#define FLOOD_APPEND_FN(NAME, ARRAY, T, FIRST)                                                 \
    static inline int NAME(ARRAY *s, T x) {                                                    \
        if (s->n == s->cap) {                                                                  \
            const int64_t cap = s->cap ? 2 * s->cap : (FIRST);                                 \
            T *a = realloc(s->a, (size_t)cap * sizeof *a);                                     \
            if (a == NULL) return -1;                                                          \
            s->a = a;                                                                          \
            s->cap = cap;                                                                      \
        }                                                                                      \
        s->a[s->n++] = x;                                                                      \
        return 0;                                                                              \
    }
FLOOD_APPEND_FN(flood_append, flood_bucket, uint64_t, 256)
FLOOD_APPEND_FN(flood_push, flood_stack, int32_t, 4096)

static inline int64_t flood_slot(uint64_t key, int64_t cap) {
    return (int64_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

/* keep the least w for the pair of labels a != b: 0, or -1 out of memory */
static int flood_spill(flood_spills *t, uint32_t a, uint32_t b, float w) {
    const uint64_t key = a < b ? (uint64_t)a << 32 | b : (uint64_t)b << 32 | a;
    if (2 * (t->n + 1) > t->cap) { /* at most half full */
        const int64_t cap = t->cap ? 2 * t->cap : 1024;
        uint64_t *keys = calloc((size_t)cap, sizeof *keys);
        float *ws = malloc((size_t)cap * sizeof *ws);
        if (keys == NULL || ws == NULL) {
            free(keys);
            free(ws);
            return -1;
        }
        for (int64_t i = 0; i < t->cap; ++i) {
            if (!t->key[i]) continue;
            int64_t h = flood_slot(t->key[i], cap);
            while (keys[h]) h = (h + 1) & (cap - 1);
            keys[h] = t->key[i];
            ws[h] = t->w[i];
        }
        free(t->key);
        free(t->w);
        t->key = keys;
        t->w = ws;
        t->cap = cap;
    }
    for (int64_t h = flood_slot(key, t->cap);; h = (h + 1) & (t->cap - 1)) {
        if (t->key[h] == key) {
            if (w < t->w[h]) t->w[h] = w;
            return 0;
        }
        if (!t->key[h]) {
            t->key[h] = key;
            t->w[h] = w;
            ++t->n;
            return 0;
        }
    }
}

/* the bucket of key k while the last key popped is last: 0 when equal, else 1 + the highest
   bit where they differ */
static inline int flood_bucket_of(uint32_t k, uint32_t last) {
    return k == last ? 0 : 32 - __builtin_clz(k ^ last);
}

/* the cells around p (three rows): soon read */
static inline void flood_prefetch(const uint8_t *closed, const float *fh,
                                  const int32_t *label, int64_t p, int64_t w2) {
#if defined(__GNUC__)
    for (int64_t r = -w2; r <= w2; r += w2) {
        if (label)
            __builtin_prefetch(label + p + r, 1, 3);
        else
            __builtin_prefetch(closed + p + r, 0, 3);
        __builtin_prefetch(fh + p + r, 1, 3);
    }
#endif
}

int64_t terrain_flood_grid(const float *z, const uint8_t *outlet, int64_t H, int64_t W,
                           int connectivity, int seams, float *fh, int32_t *label,
                           uint64_t **spill_keys, float **spill_w,
                           const volatile uint8_t *stop) {
    const int64_t w2 = W + 2, n2 = (H + 2) * (W + 2);
    if (spill_keys) *spill_keys = NULL;
    if (spill_w) *spill_w = NULL;
    if (H <= 0 || W <= 0) return 0;
    if (n2 >= ((int64_t)1 << 31)) return -2;
    const int64_t off8[8] = {1, w2 + 1, w2, w2 - 1, -1, -w2 - 1, -w2, -w2 + 1};
    const int64_t off4[4] = {1, w2, -1, -w2};
    const int64_t *off = connectivity == 8 ? off8 : off4;
    const int nk = connectivity == 8 ? 8 : 4;
    /* closed: reached, or never entered (the frame, nodata); fh holds z until a cell is
       reached, then its level. One byte a cell beside fh: the flood's scattered reads touch
       two arrays, the smaller one cached far longer than a second float array. A strip's
       labels say it themselves (-1 never entered, 0 not reached yet). */
#define FLOOD_CLOSED(q) (label ? label[q] != 0 : closed[q] != 0)
    uint8_t *closed = label ? NULL : malloc((size_t)n2);
    flood_bucket bucket[33] = {{0}};
    flood_stack pit = {0}, slope = {0};
    flood_spills spills = {0};
    uint32_t last = 0;
    int64_t queued = 0, rc = 0;
    int infinite = 0;
    if (closed == NULL && label == NULL) return -1;
    for (int64_t i = 0; i < H + 2; ++i)
        for (int64_t j = 0; j < w2; ++j) {
            const int64_t p = i * w2 + j;
            int never = 1; /* the frame's fh is never read */
            if (i > 0 && i <= H && j > 0 && j <= W) {
                const float zc = z[(i - 1) * W + j - 1];
                fh[p] = zc;
                never = zc != zc;
                infinite |= zc == INFINITY || zc == -INFINITY;
            }
            if (label)
                label[p] = -never;
            else
                closed[p] = (uint8_t)never;
        }
    if (infinite) { /* no level above inf: refused (the caller names the cell) */
        rc = -4;
        goto done;
    }
    int32_t next = 2; /* the seams' labels */
    for (int pass = 0; pass < (label ? 3 : 1); ++pass) { /* the outlets, then the seams */
        if (pass == 1 && !(seams & 1)) continue;
        if (pass == 2 && !(seams & 2)) continue;
        const int64_t i0 = pass == 2 ? H - 1 : 0, i1 = pass == 1 ? 1 : H;
        for (int64_t i = i0; i < i1; ++i)
            for (int64_t j = 0; j < W; ++j) {
                const int64_t p = (i + 1) * w2 + j + 1;
                if ((pass == 0 && !outlet[i * W + j]) || FLOOD_CLOSED(p)) continue;
                if (label)
                    label[p] = pass == 0 ? 1 : next++;
                else
                    closed[p] = 1;
                const uint32_t k = flood_key(fh[p]);
                if (flood_append(&bucket[flood_bucket_of(k, last)], ((uint64_t)k << 32) | p))
                    goto oom;
                ++queued;
            }
    }
    for (int64_t taken = 1;; ++taken) {
        int64_t p;
        if ((taken & 0xFFFF) == 0 && *stop) {
            rc = -3;
            goto done;
        }
        if (slope.n) { /* a cell above the level of the cell it was reached from */
            p = slope.a[--slope.n];
            const float zp = fh[p];
            int k = 0; /* every open neighbour above zp, its own level: expand it now */
            for (; k < nk; ++k) {
                const int64_t q = p + off[k];
                if (!FLOOD_CLOSED(q) && fh[q] <= zp) break;
            }
            if (k < nk) { /* it would: in turn, at level zp */
                const uint32_t kp = flood_key(zp);
                if (flood_append(&bucket[flood_bucket_of(kp, last)], ((uint64_t)kp << 32) | p))
                    goto oom;
                ++queued;
                continue;
            }
        } else if (pit.n) {
            p = pit.a[--pit.n];
        } else {
            if (queued == 0) break;
            if (bucket[0].n == 0) { /* the next key: the least of the lowest bucket */
                int b = 1;
                while (bucket[b].n == 0) ++b;
                flood_bucket *from = &bucket[b];
                uint64_t least = from->a[0];
                for (int64_t t = 1; t < from->n; ++t)
                    if (from->a[t] < least) least = from->a[t];
                last = (uint32_t)(least >> 32);
                for (int64_t t = 0; t < from->n; ++t) {
                    const uint64_t item = from->a[t];
                    if (flood_append(&bucket[flood_bucket_of((uint32_t)(item >> 32), last)],
                                     item))
                        goto oom;
                }
                from->n = 0;
            }
            p = (int64_t)(uint32_t)bucket[0].a[--bucket[0].n];
            --queued;
            /* the queue's cells lie anywhere: fetch the next one's while this one is done */
            if (bucket[0].n > FLOOD_AHEAD)
                flood_prefetch(closed, fh, label,
                               (uint32_t)bucket[0].a[bucket[0].n - 1 - FLOOD_AHEAD], w2);
        }
        const int32_t a = label ? label[p] : 0;
        const float lp = fh[p]; /* its level: the last key popped, a pit's, a slope's own z */
        for (int k = 0; k < nk; ++k) {
            const int64_t q = p + off[k];
            if (FLOOD_CLOSED(q)) {
                if (label && label[q] != a && label[q] > 0 &&
                    flood_spill(&spills, (uint32_t)a, (uint32_t)label[q],
                                fh[q] > lp ? fh[q] : lp))
                    goto oom;
                continue;
            }
            if (label)
                label[q] = a;
            else
                closed[q] = 1;
            if (fh[q] <= lp) { /* never beside a slope expanded: lp is the level popped */
                fh[q] = lp;
                if (flood_push(&pit, (int32_t)q)) goto oom;
            } else if (flood_push(&slope, (int32_t)q)) {
                goto oom;
            }
        }
    }
    /* the levels (and labels) to the front, row i at i * W (never past what is still to be
       read); the unreached and nodata: inf (label 0) */
    for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j) {
            const int64_t p = (i + 1) * w2 + j + 1;
            const int reached = label ? label[p] > 0 : closed[p] && fh[p] == fh[p];
            fh[i * W + j] = reached ? fh[p] : INFINITY;
            if (label) label[i * W + j] = reached ? label[p] : 0;
        }
    if (label) { /* the spills to the front of their table */
        int64_t m = 0;
        for (int64_t h = 0; h < spills.cap; ++h)
            if (spills.key[h]) {
                spills.key[m] = spills.key[h];
                spills.w[m++] = spills.w[h];
            }
        *spill_keys = spills.key;
        *spill_w = spills.w;
        spills.key = NULL;
        spills.w = NULL;
        rc = m;
    }
    goto done;
oom:
    rc = -1;
done:
    free(closed);
    free(pit.a);
    free(slope.a);
    free(spills.key);
    free(spills.w);
    for (int b = 0; b < 33; ++b) free(bucket[b].a);
    return rc;
#undef FLOOD_CLOSED
}

static inline void eps_sift_up(float *hz, int64_t *hc, int64_t hole, float vz, int64_t vc);
static int64_t eps_pop(float *hz, int64_t *hc, int64_t size);

/* The strips' labels' levels: g (n) holds -inf at the outlets' labels and +inf elsewhere;
 * each becomes the least, over paths of spills (eu[e], ev[e]) from an outlets' label, of
 * the paths' greatest weight ew[e] (a minimax Dijkstra over the epsilon fill's binary heap,
 * below). Returns 0, or -1 out of memory. */
int64_t terrain_spill_levels(int64_t n, int64_t m, const int64_t *eu, const int64_t *ev,
                             const float *ew, float *g) {
    int64_t *start = calloc((size_t)n + 1, sizeof *start);
    int64_t *to = malloc((size_t)(2 * m + 1) * sizeof *to);
    float *w = malloc((size_t)(2 * m + 1) * sizeof *w);
    int64_t *hv = malloc((size_t)(n + 2 * m + 1) * sizeof *hv);
    float *hk = malloc((size_t)(n + 2 * m + 1) * sizeof *hk);
    int64_t rc = -1, size = 0;
    if (!start || !to || !w || !hv || !hk) goto out;
    for (int64_t e = 0; e < m; ++e) {
        ++start[eu[e] + 1];
        ++start[ev[e] + 1];
    }
    for (int64_t v = 0; v < n; ++v) start[v + 1] += start[v];
    for (int64_t e = 0; e < m; ++e) { /* hv as the fill cursors */
        hv[eu[e]] = hv[ev[e]] = 0;
    }
    for (int64_t e = 0; e < m; ++e) {
        const int64_t a = eu[e], b = ev[e];
        to[start[a] + hv[a]] = b;
        w[start[a] + hv[a]++] = ew[e];
        to[start[b] + hv[b]] = a;
        w[start[b] + hv[b]++] = ew[e];
    }
    for (int64_t v = 0; v < n; ++v) /* the outlets' labels first: a heap of equal keys */
        if (g[v] == -INFINITY) {
            hk[size] = g[v];
            hv[size++] = v;
        }
    while (size) {
        size = eps_pop(hk, hv, size);
        const float k = hk[size];
        const int64_t v = hv[size];
        if (k > g[v]) continue; /* a stale entry */
        for (int64_t t = start[v]; t < start[v + 1]; ++t) {
            const float nk = w[t] > k ? w[t] : k;
            const int64_t u = to[t];
            if (nk >= g[u]) continue;
            g[u] = nk;
            eps_sift_up(hk, hv, size++, nk, u);
        }
    }
    rc = 0;
out:
    free(start);
    free(to);
    free(w);
    free(hv);
    free(hk);
    return rc;
}

/* labels[i] = table[labels[i]] for the n cells of a strip: its own region numbers made the
 * grid's (terrain/hydrology/fill.py _join_strip_labels), in place */
void terrain_renumber_strip(int32_t *labels, int64_t n, const int32_t *table) {
    for (int64_t i = 0; i < n; ++i) labels[i] = table[labels[i]];
}

/* out[i] = max(f[i], g[label[i]]) for n cells of a strip, front to back: its levels raised
 * to their labels' spill levels on their way to out, which may lie at or before f in the
 * same buffer (the flood's buffer compacted as it is raised) */
void terrain_flood_raise(float *out, const float *f, const int32_t *label, int64_t n,
                         const float *g) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = g[label[i]], x = f[i];
        out[i] = v > x ? v : x;
    }
}

/* ==========================================================================================
 * The epsilon fill's levels (terrain/hydrology/fill.py epsilon_levels): RichDEM's
 * PriorityFloodEpsilon_Barnes2014 step for step, so its ulps are RichDEM's. A binary heap of
 * cells at their elevation, libstdc++'s push_heap/pop_heap move for move (RichDEM's queue
 * compares elevations only: among equal ones this heap's order decides the ulps), and a FIFO
 * of cells raised to the next float32 above the cell they were reached from. seeds in
 * RichDEM's order, those with seed_nodata at -inf; with named outlets a nodata cell is never
 * entered. (ndr, ndc): RichDEM's nk neighbour steps. e (H x W) gets the levels, inf where
 * unreached. Returns 0, -1 out of memory, -3 when *stop was set (checked every 65536 cells).
 * ========================================================================================== */

static inline void eps_sift_up(float *hz, int64_t *hc, int64_t hole, float vz, int64_t vc) {
    int64_t parent = (hole - 1) / 2;
    while (hole > 0 && hz[parent] > vz) {
        hz[hole] = hz[parent];
        hc[hole] = hc[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    hz[hole] = vz;
    hc[hole] = vc;
}

/* std::pop_heap: the top moved to slot size - 1 (__adjust_heap from the root); returns the
 * new size */
static int64_t eps_pop(float *hz, int64_t *hc, int64_t size) {
    const int64_t last = size - 1;
    if (last > 0) {
        const float vz = hz[last];
        const int64_t vc = hc[last];
        hz[last] = hz[0];
        hc[last] = hc[0];
        const int64_t n = last;
        int64_t hole = 0, child = 0;
        while (child < (n - 1) / 2) {
            child = 2 * (child + 1);
            if (hz[child] > hz[child - 1]) --child;
            hz[hole] = hz[child];
            hc[hole] = hc[child];
            hole = child;
        }
        if ((n & 1) == 0 && child == (n - 2) / 2) {
            child = 2 * (child + 1);
            hz[hole] = hz[child - 1];
            hc[hole] = hc[child - 1];
            hole = child - 1;
        }
        eps_sift_up(hz, hc, hole, vz, vc);
    }
    return last;
}

int64_t terrain_fill_epsilon(const float *z, int64_t H, int64_t W, const int64_t *seeds,
                             const uint8_t *seed_nodata, int64_t nseeds, const int64_t *ndr,
                             const int64_t *ndc, int64_t nk, int named, float *e,
                             const volatile uint8_t *stop) {
    const int64_t n = H * W;
    uint8_t *closed = calloc((size_t)(n > 0 ? n : 1), 1);
    float *hz = malloc((size_t)(nseeds + n + 1) * sizeof *hz);
    int64_t *hc = malloc((size_t)(nseeds + n + 1) * sizeof *hc);
    float *qz = malloc((size_t)(n + 1) * sizeof *qz);
    int64_t *qc = malloc((size_t)(n + 1) * sizeof *qc);
    int64_t rc = -1, size = 0, head = 0, tail = 0, popped = 0;
    if (closed == NULL || hz == NULL || hc == NULL || qz == NULL || qc == NULL) goto done;
    for (int64_t i = 0; i < n; ++i) e[i] = INFINITY;
    for (int64_t t = 0; t < nseeds; ++t) {
        const int64_t c = seeds[t];
        if (!seed_nodata[t]) e[c] = z[c];
        closed[c] = 1;
        eps_sift_up(hz, hc, size++, seed_nodata[t] ? -INFINITY : z[c], c);
    }
    rc = 0;
    while (size > 0 || head < tail) {
        float cz;
        int64_t c;
        if (head < tail && !(size > 0 && hz[0] == qz[head])) {
            cz = qz[head];
            c = qc[head++];
        } else {
            size = eps_pop(hz, hc, size);
            cz = hz[size];
            c = hc[size];
        }
        if ((++popped & 0xFFFF) == 0 && *stop) { rc = -3; goto done; }
        const int64_t i = c / W, j = c - (c / W) * W;
        const float nxt = nextafterf(cz, INFINITY);
        for (int64_t k = 0; k < nk; ++k) {
            const int64_t ii = i + ndr[k], jj = j + ndc[k];
            if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
            const int64_t u = ii * W + jj;
            if (closed[u]) continue;
            const float zu = z[u];
            if (isnan(zu)) {
                if (named) continue;
                closed[u] = 1;
                qz[tail] = -INFINITY;
                qc[tail++] = u;
                continue;
            }
            closed[u] = 1;
            if (zu <= nxt) {
                e[u] = nxt;
                qz[tail] = nxt;
                qc[tail++] = u;
            } else {
                e[u] = zu;
                eps_sift_up(hz, hc, size++, zu, u);
            }
        }
    }
done:
    free(closed);
    free(hz);
    free(hc);
    free(qz);
    free(qc);
    return rc;
}

/* ==========================================================================================
 * The depression hierarchy (terrain/hydrology/fill.py depression_hierarchy): Kruskal over the
 * forest's m edges (eu, ev) given sorted by (weight ew, id), the outlets (drained0 != 0)
 * drained from the start (docs/hydrology.md). *out gets a malloc'd array of k rows of 8
 * doubles (pit, pit_z, spill, parent, left, right, cells, volume; exact: float32 levels, ids
 * and counts below 2^53), freed with terrain_free. Returns k, -1 out of memory, or -3 when
 * *stop was set (checked every 65536 edges).
 * ========================================================================================== */

static inline int64_t hier_find(int64_t *parent, int64_t x) {
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

int64_t terrain_fill_hierarchy(const float *z, int64_t n, const int64_t *eu, const int64_t *ev,
                               const float *ew, int64_t m, const uint8_t *drained0,
                               double **out, const volatile uint8_t *stop) {
    int64_t *parent = malloc((size_t)(n > 0 ? n : 1) * sizeof *parent);
    int64_t *size = malloc((size_t)(n > 0 ? n : 1) * sizeof *size);
    int64_t *pit = malloc((size_t)(n > 0 ? n : 1) * sizeof *pit);
    int64_t *node = malloc((size_t)(n > 0 ? n : 1) * sizeof *node);
    double *sumz = malloc((size_t)(n > 0 ? n : 1) * sizeof *sumz);
    uint8_t *drained = malloc((size_t)(n > 0 ? n : 1));
    /* a component's highest elevation and its cells there: the cells at a spill level are
     * not flooded, and whether the saddle joined the depression before the merge is the
     * order among equal weights, so a depression's cells are those below the level */
    float *top = malloc((size_t)(n > 0 ? n : 1) * sizeof *top);
    int64_t *ntop = malloc((size_t)(n > 0 ? n : 1) * sizeof *ntop);
    int64_t cap = 16, k = 0, rc = -1;
    double *nodes = malloc((size_t)cap * 8 * sizeof *nodes);
    *out = NULL;
    if (!parent || !size || !pit || !node || !sumz || !drained || !top || !ntop || !nodes)
        goto done;
    for (int64_t x = 0; x < n; ++x) {
        parent[x] = x;
        size[x] = 1;
        pit[x] = x;
        node[x] = -1;
        sumz[x] = (double)z[x];
        drained[x] = drained0[x] != 0;
        top[x] = z[x];
        ntop[x] = 1;
    }
/* a new row of nodes (zeros), the array doubled when full */
#define HIER_ROW()                                                                             \
    {                                                                                          \
        if (k == cap) {                                                                        \
            double *g = realloc(nodes, (size_t)(2 * cap) * 8 * sizeof *g);                     \
            if (g == NULL) goto done;                                                          \
            nodes = g;                                                                         \
            cap *= 2;                                                                          \
        }                                                                                      \
        memset(nodes + 8 * k, 0, 8 * sizeof *nodes);                                           \
        ++k;                                                                                   \
    }
    for (int64_t e = 0; e < m; ++e) {
        if ((e & 0xFFFF) == 0 && *stop) {
            rc = -3;
            goto done;
        }
        int64_t a = hier_find(parent, eu[e]), b = hier_find(parent, ev[e]);
        if (a == b) continue;
        const float level = ew[e];
        int64_t ids[2];
        int deep[2];
        for (int t = 0; t < 2; ++t) {
            const int64_t x = t == 0 ? a : b;
            deep[t] = !drained[x] && z[pit[x]] < level;
            if (deep[t] && node[x] < 0) { /* a new leaf */
                HIER_ROW()
                double *r = nodes + 8 * (k - 1);
                r[0] = (double)pit[x];
                r[1] = (double)z[pit[x]];
                r[2] = INFINITY;
                node[x] = k;
            }
            ids[t] = node[x];
        }
        int64_t made = -1;
        const int spills = (deep[0] && deep[1]) || drained[a] || drained[b];
        if (spills) /* each deep side ends here: it merges with the other, or drains */
            for (int t = 0; t < 2; ++t)
                if (deep[t]) {
                    const int64_t x = t == 0 ? a : b;
                    double *r = nodes + 8 * (ids[t] - 1);
                    const int64_t at = top[x] == level ? ntop[x] : 0;
                    r[2] = (double)level;
                    r[6] = (double)(size[x] - at);
                    r[7] = (double)size[x] * (double)level - sumz[x]; /* those at it add 0 */
                }
        if (deep[0] && deep[1]) {
            HIER_ROW()
            made = k;
            double *r = nodes + 8 * (k - 1);
            r[2] = INFINITY;
            r[4] = (double)ids[0];
            r[5] = (double)ids[1];
            nodes[8 * (ids[0] - 1) + 3] = (double)k;
            nodes[8 * (ids[1] - 1) + 3] = (double)k;
        } else if (deep[0] && !spills) {
            made = ids[0]; /* a depression swallowing a shallow component */
        } else if (deep[1] && !spills) {
            made = ids[1];
        }
        /* union (the smaller pit (z, cell) is the pit of the union) */
        const int64_t pa = pit[a], pb = pit[b];
        const int64_t low = (z[pa] < z[pb] || (z[pa] == z[pb] && pa < pb)) ? pa : pb;
        if (size[a] < size[b]) {
            const int64_t t = a;
            a = b;
            b = t;
        }
        parent[b] = a;
        size[a] += size[b];
        sumz[a] += sumz[b];
        if (top[b] > top[a]) {
            top[a] = top[b];
            ntop[a] = ntop[b];
        } else if (top[b] == top[a]) {
            ntop[a] += ntop[b];
        }
        pit[a] = low;
        const uint8_t dr = drained[a] || drained[b];
        drained[a] = dr;
        if (made >= 1 && deep[0] && deep[1]) {
            nodes[8 * (made - 1) + 0] = (double)low;
            nodes[8 * (made - 1) + 1] = (double)z[low];
        }
        node[a] = dr ? -1 : made;
    }
#undef HIER_ROW
    for (int64_t x = 0; x < n; ++x) /* depressions that never drain (no outlet reachable) */
        if (parent[x] == x && node[x] >= 1) {
            nodes[8 * (node[x] - 1) + 6] = (double)size[x];
            nodes[8 * (node[x] - 1) + 7] = NAN;
        }
    rc = k;
done:
    free(parent);
    free(size);
    free(pit);
    free(node);
    free(sumz);
    free(drained);
    free(top);
    free(ntop);
    if (rc < 0)
        free(nodes);
    else
        *out = nodes;
    return rc;
}

/* Frees what a kernel returned through an out pointer. */
void terrain_free(void *p) { free(p); }

/* Connected regions of the cells equal to value inside a margin (rows and columns [margin,
   H - margin) of an H x W grid; 4- or 8-connected) numbered 1, 2, ... in the row-major order
   of their first cell into labels (zeroed here; 0 elsewhere): scipy.ndimage's label, whose
   import alone took 0.65 s of a 4 s fill (terrain/hydrology/fill.py depression_labels), and
   the flow's flats (value FLOW_FLAT, margin 2: a block's interior). With away, maxa[l] gets
   region l's largest finite away (maxa[0] = 0; the caller sizes it 1 + the cells). Each
   region is walked from its first cell with a growable stack. Returns the number of regions,
   -1 out of memory, -3 when *stop was set (polled each row). */
typedef struct { int64_t *a; int64_t n, cap; } region_stack;
FLOOD_APPEND_FN(region_push, region_stack, int64_t, 4096)

int64_t terrain_label_regions(const uint8_t *cells, int value, int64_t H, int64_t W,
                              int64_t margin, int connectivity, const int32_t *away,
                              int32_t *maxa, int32_t *labels, const volatile uint8_t *stop) {
    const int step = connectivity == 8 ? 1 : 2;
    int64_t count = 0, rc = 0;
    region_stack stack = {NULL, 0, 0};
    memset(labels, 0, (size_t)(H * W) * sizeof *labels);
    if (maxa != NULL) maxa[0] = 0;
    for (int64_t r0 = margin; r0 < H - margin && rc == 0; ++r0) {
        if (*stop) { /* a region's walk between two checks: the grid's */
            rc = -3;
            break;
        }
        for (int64_t c0 = margin; c0 < W - margin && rc == 0; ++c0) {
            const int64_t v0 = r0 * W + c0;
            if (cells[v0] != value || labels[v0] != 0) continue;
            const int32_t id = (int32_t)++count;
            int32_t best = 0;
            labels[v0] = id;
            /* the stack holds (row << 32 | column): no division of a cell number by W */
            if (region_push(&stack, r0 << 32 | c0)) rc = -1;
            while (stack.n > 0 && rc == 0) {
                const int64_t rc_ = stack.a[--stack.n], r = rc_ >> 32, c = rc_ & 0xFFFFFFFF;
                const int64_t v = r * W + c;
                if (away != NULL && away[v] < FLOW_INF && away[v] > best) best = away[v];
                for (int k = 0; k < 8; k += step) {
                    const int64_t nr = r + NB_DR[k], nc = c + NB_DC[k];
                    if (nr < margin || nr >= H - margin || nc < margin || nc >= W - margin)
                        continue;
                    const int64_t u = nr * W + nc;
                    if (cells[u] != value || labels[u] != 0) continue;
                    labels[u] = id;
                    if (region_push(&stack, nr << 32 | nc)) {
                        rc = -1;
                        break;
                    }
                }
            }
            if (maxa != NULL) maxa[id] = best;
        }
    }
    free(stack.a);
    return rc != 0 ? rc : count;
}

/* ==========================================================================================
 * Sparse graphs (terrain/graph, loaded through terrain/graph/_native.py): the edge-list
 * scanner, the SNAP relabelling, the CSR build and the CPU BFS operators.
 *
 * The same library as the grid parser, for the same reasons: a process that only loads a
 * graph and runs one BFS pays neither Numba's import nor its first kernel load (about 0.5 to
 * 0.8 CPU seconds, more than the whole load of a 100 MB edge list on two cores), and ctypes
 * releases the GIL, so Python threads run the per-chunk, per-block and per-row-range calls
 * in parallel. Error codes match terrain/graph/loaders.py (_ERR_*).
 * ========================================================================================== */

#define G_ERR_NONE 0
#define G_ERR_TOKEN 1
#define G_ERR_FEW 2
#define G_ERR_NEG 3
#define G_ERR_TAG 4
#define G_ERR_BIG 5
#define G_ERR_WEIGHT 8
#define G_ERR_WEIGHT_INT 9
#define G_ERR_EXTRA 10
#define G_ERR_WEIGHT_BIG 12
#define G_ERR_EMPTY 13
#define G_SP 32
#define G_TAB 9
#define G_CR 13
#define G_LF 10

static inline int g_blank(uint8_t c) { return c == G_SP || c == G_TAB; }
static inline int g_sep(uint8_t c) { return c == G_SP || c == G_TAB || c == G_CR || c == G_LF; }
/* the same with the edge list's own separator too (sep: ',' in a comma-separated file, or 0) */
static inline int g_blank_s(uint8_t c, int sep) { return g_blank(c) || (sep && c == sep); }
static inline int g_sep_s(uint8_t c, int sep) { return g_sep(c) || (sep && c == sep); }
/* Move *ip to the next field of a line: past blanks and, in a file with a separator, at most
 * one of it (blanks around it allowed). An empty field is G_ERR_EMPTY: a separator opening the
 * line (first), two with nothing between them, or one that ends the line ("1,2," would
 * otherwise read as "1 2", "1,,2" as "1 2"). */
static inline int g_next_field(const uint8_t *buf, int64_t *ip, int64_t end, int sep,
                               int first) {
    int64_t i = *ip;
    while (i < end && g_blank(buf[i])) ++i;
    if (sep && i < end && buf[i] == sep) {
        if (first) return G_ERR_EMPTY;
        ++i;
        while (i < end && g_blank(buf[i])) ++i;
        if (i >= end || buf[i] == sep || buf[i] == G_LF || buf[i] == G_CR) return G_ERR_EMPTY;
    }
    *ip = i;
    return G_ERR_NONE;
}

/* Line feeds in buf[0:end), 32 bytes a step: an upper bound of the records of an edge-list
 * chunk (terrain/graph/loaders.py read_graph_file sizes its slices with it). An exact record
 * count with a memchr per line (the loader's earlier pre-pass) costs a call per line
 * (RMAT-18's 16-byte lines: 21 ms a core for 61 MB); this loop counts bytes with no branch
 * per line (the byte counters are folded into the total before they can wrap). */
int64_t terrain_lf_count(const uint8_t *buf, int64_t end) {
    int64_t total = 0, i = 0;
    while (end - i >= 32) {
        int64_t stop = i + 32 * 255;
        if (stop > end - ((end - i) % 32)) stop = end - ((end - i) % 32);
        uint8_t acc[32] = {0};
        for (; i < stop; i += 32)
            for (int j = 0; j < 32; ++j) acc[j] += (uint8_t)(buf[i + j] == G_LF);
        for (int j = 0; j < 32; ++j) total += acc[j];
    }
    for (; i < end; ++i) total += buf[i] == G_LF;
    return total;
}

/* Index of the lowest set bit of x != 0. */
static inline int g_ctz64(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(x);
#else
    int n = 0;
    while (!(x & 1u)) {
        x >>= 1;
        ++n;
    }
    return n;
#endif
}

/* An optional '-' and the decimal digits at buf[*i]: value (wrapping past 19 digits; callers
 * refuse more than 18), digit count, sign; *i moves past them. */
static inline int64_t g_int_token(const uint8_t *buf, int64_t *ip, int64_t end, int *nd_out,
                                  int *neg_out) {
    int64_t i = *ip;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (i + 8 <= end) {
        /* 1-7 digits within the next 8 bytes, in a few word operations (SWAR): the digit
         * loop's exit is a mispredicted branch per token, and a line holds three tokens of
         * varying length. Byte b is a digit iff neither b - '0' nor b + 0x46 sets its top bit
         * (a borrow or carry only spreads from a non-digit byte to the bytes after it, so the
         * first non-digit is found exactly); anything else (a sign, 8+ digits, no digit) takes
         * the loop below, which gives the same result. */
        uint64_t x;
        memcpy(&x, buf + i, 8);
        const uint64_t digits = x - 0x3030303030303030ull;
        const uint64_t stop = (digits | (x + 0x4646464646464646ull)) & 0x8080808080808080ull;
        if (stop != 0) {
            const int len = g_ctz64(stop) >> 3;
            if (len > 0) {
                /* the digits to the top bytes (leading zeros below), then pairs, quads,
                 * eights of digit values combined by three multiplies */
                uint64_t v = digits << (8 * (8 - len));
                v = ((v & 0x0F0F0F0F0F0F0F0Full) * 2561) >> 8;
                v = ((v & 0x00FF00FF00FF00FFull) * 6553601) >> 16;
                v = ((v & 0x0000FFFF0000FFFFull) * 42949672960001ull) >> 32;
                *ip = i + len;
                *nd_out = len;
                *neg_out = 0;
                return (int64_t)v;
            }
        }
    }
#endif /* the word's first byte must be its lowest: little-endian only */
    int neg = 0, nd = 0;
    uint64_t val = 0;
    if (i < end && buf[i] == '-') {
        neg = 1;
        ++i;
    }
    unsigned int d;
    while (i < end && (d = (unsigned int)buf[i] - '0') <= 9u) {
        val = val * 10u + d;
        ++i;
        ++nd;
    }
    *ip = i;
    *nd_out = nd;
    *neg_out = neg;
    return (int64_t)val;
}

#ifdef __SIZEOF_INT128__
__extension__ typedef unsigned __int128 g_u128;
static int g_bits128(g_u128 x) {
    const uint64_t hi = (uint64_t)(x >> 64), lo = (uint64_t)x;
    return hi ? 128 - __builtin_clzll(hi) : lo ? 64 - __builtin_clzll(lo) : 0;
}
/* x * 2^-k rounded to a double, to nearest, ties to even; `above`: the true value is a
 * little above x (a division's remainder). */
static double g_round128(g_u128 x, int above, int k) {
    const int n = g_bits128(x);
    if (n <= 53) return ldexp((double)(uint64_t)x, -k); /* exact (never `above` here) */
    const int shift = n - 53;
    uint64_t keep = (uint64_t)(x >> shift);
    const g_u128 rem = x & ((((g_u128)1) << shift) - 1), half = ((g_u128)1) << (shift - 1);
    if (rem > half || (rem == half && (above || (keep & 1)))) ++keep;
    return ldexp((double)keep, shift - k);
}
#endif
/* The token text[0..len) (sign included), whose digits are mant * 10^e (mant < 10^18; mant 0:
 * not known), correctly rounded: with 128-bit integers at hand and -19 <= e <= 21, the exact
 * product mant * 10^e when it fits, or mant shifted up by k bits over 10^-e, a quotient of
 * 62 bits or more with the remainder as a sticky bit, rounded once; else strtod (*ok 0 when
 * it does not read the token whole). The 17-digit values printf's %.17g writes: a 1000²
 * grid's Matrix Market file of 2 M of them loads in 0.14-0.16 s so, 0.19-0.22 s through
 * strtod alone, 1.0-1.6 s through NumPy; RMAT-18's (7.5 M) 0.25-0.34 s against 0.34-0.58 s
 * (2-core VM). Clinger's fast path stays in front for up to 15 digits: 4 M weights of three
 * decimals scanned in 0.16-0.17 s with it, 0.27-0.30 s through this path alone. */
static double g_decimal(uint64_t mant, int64_t e, int neg, const uint8_t *text, int64_t len,
                        int *ok) {
    *ok = 1;
#ifdef __SIZEOF_INT128__
    if (mant != 0 && e >= -19 && e <= 21) {
        g_u128 p10 = 1;
        for (int64_t j = 0; j < (e < 0 ? -e : e); ++j) p10 *= 10u;
        double x;
        if (e >= 0) {
            if (mant > ~(g_u128)0 / p10) goto by_strtod; /* beyond 128 bits */
            x = g_round128((g_u128)mant * p10, 0, 0);
        } else {
            const int k = 127 - g_bits128(mant);
            const g_u128 num = ((g_u128)mant) << k;
            x = g_round128(num / p10, num % p10 != 0, k);
        }
        return neg ? -x : x;
    }
by_strtod:;
#endif
    char buf[64];
    if (len >= (int64_t)sizeof buf) {
        *ok = 0;
        return 0.0;
    }
    memcpy(buf, text, (size_t)len);
    buf[len] = 0;
    char *stop = NULL;
    const double x = strtod(buf, &stop);
    *ok = stop == buf + len;
    return x;
}

/* The weight token at or after buf[i] of record k: an integer into w_int with its length in
 * w_len; a decimal token's start in w_int, its negated length in w_len and, on Clinger's exact
 * fast path (the grid parser's, above), its value in w_flt, else NaN there. */
static int g_scan_weight(const uint8_t *buf, int64_t i, int64_t end, int wmode, int sep,
                         int64_t k, int64_t *w_int, int32_t *w_len, double *w_flt) {
    w_len[k] = 0;
    w_int[k] = 0;
    while (i < end && g_blank_s(buf[i], sep)) ++i;
    if (i >= end || buf[i] == G_LF || buf[i] == G_CR) return G_ERR_WEIGHT;
    const int64_t s = i;
    int neg = 0;
    if (buf[i] == '-' || buf[i] == '+') {
        neg = buf[i] == '-';
        ++i;
    }
    uint64_t val = 0, mant = 0;
    int64_t nd = 0, frac = 0, exp_digits = 0, sig = 0, scale = 0, exp10 = 0;
    int is_int = 1, exact = 1;
    while (i < end && buf[i] >= '0' && buf[i] <= '9') {
        const unsigned int d = buf[i] - '0';
        if (nd < 19) val = val * 10u + d;
        if (mant != 0 || d != 0) {
            if (sig < 18) {
                mant = mant * 10u + d;
                ++sig;
            } else {
                exact = 0;
            }
        }
        ++nd;
        ++i;
    }
    if (i < end && buf[i] == '.') {
        is_int = 0;
        ++i;
        while (i < end && buf[i] >= '0' && buf[i] <= '9') {
            const unsigned int d = buf[i] - '0';
            if (mant != 0 || d != 0) {
                if (sig < 18) {
                    mant = mant * 10u + d;
                    ++sig;
                    ++scale;
                } else {
                    exact = 0;
                }
            } else if (exact) {
                ++scale;
            }
            ++frac;
            ++i;
        }
    }
    if (nd + frac > 0 && i < end && (buf[i] == 'e' || buf[i] == 'E')) {
        is_int = 0;
        ++i;
        int eneg = 0;
        if (i < end && (buf[i] == '-' || buf[i] == '+')) {
            eneg = buf[i] == '-';
            ++i;
        }
        while (i < end && buf[i] >= '0' && buf[i] <= '9') {
            if (exp10 < 100000) exp10 = exp10 * 10 + (buf[i] - '0');
            ++exp_digits;
            ++i;
        }
        if (eneg) exp10 = -exp10;
        if (exp_digits == 0) {
            nd = 0;
            frac = 0;
        }
    }
    const int ok = nd + frac > 0 && (i >= end || g_sep_s(buf[i], sep));
    if (!ok) return G_ERR_WEIGHT;
    if (is_int && nd <= 18) {
        w_int[k] = neg ? -(int64_t)val : (int64_t)val;
        w_len[k] = (int32_t)(i - s);
        return G_ERR_NONE;
    }
    /* an integer of more than 18 digits is read as a decimal (a float64 weight, rounded
       to nearest), where an integer weight is allowed to be one */
    if (wmode == 2) return is_int ? G_ERR_WEIGHT_BIG : G_ERR_WEIGHT_INT;
    w_int[k] = s;
    w_len[k] = (int32_t)(-(i - s));
    const int64_t e = exp10 - scale;
    if (exact && sig <= 15 && e >= -22 && e <= 22) {
        double x = (double)(int64_t)mant;
        x = e >= 0 ? x * POW10[e] : x / POW10[-e];
        w_flt[k] = neg ? -x : x;
    } else if (exact && mant == 0) {
        w_flt[k] = neg ? -0.0 : 0.0;
    } else {
        /* off the fast path (17 significant digits, as printf's %.17g writes a double): exact
         * integer arithmetic, else strtod (correctly rounded in glibc and musl); a token it
         * does not read whole (a long one, a locale's other decimal point) is left NaN, for
         * the caller's Python float */
        int ok = 0;
        const double x = g_decimal(exact ? mant : 0, e, neg, buf + s, i - s, &ok);
        w_flt[k] = ok ? x : (double)bits_to_float(NAN_BITS);
    }
    return G_ERR_NONE;
}

/* Parse lines "[tag] a b [w] [ignored...]" of buf[start:end) into out_u, out_v (and the
 * weights); terrain/graph/_native.py (parse_pairs) states the rules. result[0..2] = (records,
 * error, line start). */
void terrain_edges_parse(const uint8_t *buf, int64_t start, int64_t end, int comment_a,
                         int comment_b, int tag, int sep, int64_t limit, int64_t *out_u,
                         int64_t *out_v, int wmode, int64_t *w_int, int32_t *w_len,
                         double *w_flt, int64_t *result) {
    int64_t i = start, k = 0, last = -1;
    int err = G_ERR_NONE;
    int64_t ls = 0;
    while (i < end) {
        if (limit >= 0 && k >= limit) break;
        ls = i;
        while (i < end && g_blank(buf[i])) ++i;
        if (i >= end) break;
        const uint8_t c = buf[i];
        if (c == G_LF || c == G_CR || c == comment_a || c == comment_b) {
            const uint8_t *q = memchr(buf + i, G_LF, (size_t)(end - i));
            i = q == NULL ? end + 1 : (q - buf) + 1;
            continue;
        }
        if (tag != 0) {
            if (c != tag) {
                err = G_ERR_TAG;
                break;
            }
            ++i;
            if (i < end && !g_blank(buf[i])) {
                err = G_ERR_TAG;
                break;
            }
        }
        int64_t a = 0;
        for (int t = 0; t < 2 && err == G_ERR_NONE; ++t) {
            if ((err = g_next_field(buf, &i, end, sep, t == 0)) != G_ERR_NONE) break;
            if (i >= end || buf[i] == G_LF || buf[i] == G_CR) {
                err = G_ERR_FEW;
                break;
            }
            int nd, neg;
            const int64_t val = g_int_token(buf, &i, end, &nd, &neg);
            if (nd == 0 || (i < end && !g_sep_s(buf[i], sep))) err = G_ERR_TOKEN;
            else if (nd > 18) err = G_ERR_BIG;
            else if (neg) err = G_ERR_NEG;
            else if (t == 0) a = val;
            else {
                out_u[k] = a;
                out_v[k] = val;
            }
        }
        if (err != G_ERR_NONE) break;
        if (wmode == 1) { /* an unweighted edge list: nothing after the two ids */
            int64_t j = i;
            if ((err = g_next_field(buf, &j, end, sep, 0)) != G_ERR_NONE) break;
            if (j < end && buf[j] != G_LF && buf[j] != G_CR && buf[j] != comment_a &&
                buf[j] != comment_b) {
                err = G_ERR_EXTRA;
                break;
            }
        } else if (wmode != 0) {
            /* the common case first: a plain integer weight; anything else goes to the
             * general weight scanner */
            int64_t j = i;
            if ((err = g_next_field(buf, &j, end, sep, 0)) != G_ERR_NONE) break;
            const int64_t s = j;
            int nd, neg;
            const int64_t val = g_int_token(buf, &j, end, &nd, &neg);
            if (nd > 0 && nd <= 18 && (j >= end || g_sep_s(buf[j], sep))) {
                w_int[k] = neg ? -val : val;
                w_len[k] = (int32_t)(j - s);
                i = j;
            } else {
                err = g_scan_weight(buf, s, end, wmode, sep, k, w_int, w_len, w_flt);
                if (err != G_ERR_NONE) break;
            }
        }
        ++k;
        last = ls;
        if (i < end && buf[i] != G_LF) {
            const uint8_t *q = memchr(buf + i, G_LF, (size_t)(end - i));
            i = q == NULL ? end : (q - buf);
        }
        ++i;
    }
    result[0] = k;
    result[1] = err;
    result[2] = err != G_ERR_NONE ? ls : last;
}

/* Subtract the id base lo from every endpoint in place; the first record with u outside
 * lo..hi_u or v outside lo..hi_v, or -1. */
int64_t terrain_shift_ids(int64_t *u, int64_t *v, int64_t m, int64_t lo, int64_t hi_u,
                          int64_t hi_v) {
    int64_t bad = -1;
    for (int64_t k = 0; k < m; ++k) {
        const int64_t a = u[k], b = v[k];
        if (bad < 0 && (a < lo || a > hi_u || b < lo || b > hi_v)) bad = k;
        u[k] = a - lo;
        v[k] = b - lo;
    }
    return bad;
}

/* Largest id of u[0:m) and v[0:m) (-1 when m is 0). */
int64_t terrain_max_id(const int64_t *u, const int64_t *v, int64_t m) {
    int64_t hi = -1;
    for (int64_t k = 0; k < m; ++k) {
        const int64_t x = u[k] > v[k] ? u[k] : v[k];
        if (x > hi) hi = x;
    }
    return hi;
}

/* present[ids[k]] = 1 (threads may store 1 into the same byte: the same value). */
void terrain_mark_present(const int64_t *ids, int64_t m, uint8_t *present) {
    for (int64_t k = 0; k < m; ++k) present[ids[k]] = 1;
}

/* out[k] = relabel[ids[k]] (out may be ids itself). */
void terrain_relabel(const int64_t *ids, int64_t m, const int64_t *relabel, int64_t *out) {
    for (int64_t k = 0; k < m; ++k) out[k] = relabel[ids[k]];
}

/* ---------------------------------------------------------------- CSR build (csr.py says how)
 * Row counters per edge block, int64. Block t of the edges counts its entries per row ... */

/* counts[i] += entries of row i in edges [k0, k1) (self-loops dropped; both rows when both). */
void terrain_csr_count(const int64_t *u, const int64_t *v, int64_t k0, int64_t k1,
                       int64_t *counts, int both) {
    for (int64_t k = k0; k < k1; ++k) {
        const int64_t a = u[k], b = v[k];
        if (a != b) {
            ++counts[a];
            if (both) ++counts[b];
        }
    }
}

/* From the blocks' row counts (counts[t * n + i]): deg, indptr (their prefix sums), and in
 * counts each block's first slot in every row (block 0 first: the scatter keeps edge order). */
void terrain_csr_offsets(int64_t *counts, int64_t blocks, int64_t n, int64_t *deg,
                         int64_t *indptr) {
    int64_t total = 0;
    indptr[0] = 0;
    for (int64_t i = 0; i < n; ++i) {
        int64_t pos = total;
        for (int64_t t = 0; t < blocks; ++t) {
            const int64_t c = counts[t * n + i];
            counts[t * n + i] = pos;
            pos += c;
        }
        deg[i] = pos - total;
        total = pos;
        indptr[i + 1] = total;
    }
}

/* One definition per (index type, weight type): the scatter, the row sort with
 * de-duplication (minimum weight kept) and the compaction. WITH_W 0: no weights (WT is a
 * dummy, never read).
 * The scatter writes to random rows when the vertex numbers carry no locality (RMAT: every
 * store misses), and the store buffer, full of misses, stalls the loop: it prefetches, for
 * write, the row cursors of the edge 2 x CSR_AHEAD ahead and the slots of the one
 * CSR_AHEAD ahead (RMAT-18, 3.8 M edges, one thread: 77 -> 38 ms; a grid, whose rows are
 * local, 7.7 -> 8.4 ms). A hint only: a cursor read early may be stale, the result is not. */
#define CSR_AHEAD 16
#if defined(__GNUC__) || defined(__clang__)
#define CSR_PREFETCH_W(p) __builtin_prefetch((p), 1, 3)
#else
#define CSR_PREFETCH_W(p) ((void)0)
#endif
#define TERRAIN_CSR_FUNCS(IT, IN, WT, WN, WITH_W)                                               \
    void terrain_csr_scatter_##IN##_##WN(const int64_t *u, const int64_t *v, const WT *w,      \
                                         int64_t k0, int64_t k1, int64_t *fill, IT *indices,   \
                                         WT *weights, int both) {                              \
        for (int64_t k = k0; k < k1; ++k) {                                                    \
            if (k + 2 * CSR_AHEAD < k1) {   /* the row cursors of an edge 2 x ahead */         \
                CSR_PREFETCH_W(&fill[u[k + 2 * CSR_AHEAD]]);                                   \
                if (both) CSR_PREFETCH_W(&fill[v[k + 2 * CSR_AHEAD]]);                         \
            }                                                                                  \
            if (k + CSR_AHEAD < k1) {       /* the slots it will write, from them */           \
                const int64_t fa = fill[u[k + CSR_AHEAD]];                                     \
                CSR_PREFETCH_W(&indices[fa]);                                                  \
                if (WITH_W) CSR_PREFETCH_W(&weights[fa]);                                      \
                if (both) {                                                                    \
                    const int64_t fb = fill[v[k + CSR_AHEAD]];                                 \
                    CSR_PREFETCH_W(&indices[fb]);                                              \
                    if (WITH_W) CSR_PREFETCH_W(&weights[fb]);                                  \
                }                                                                              \
            }                                                                                  \
            const int64_t a = u[k], b = v[k];                                                  \
            if (a == b) continue;                                                              \
            indices[fill[a]] = (IT)b;                                                          \
            if (WITH_W) weights[fill[a]] = w[k];                                               \
            ++fill[a];                                                                         \
            if (both) {                                                                        \
                indices[fill[b]] = (IT)a;                                                      \
                if (WITH_W) weights[fill[b]] = w[k];                                           \
                ++fill[b];                                                                     \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    static void csr_radix_##IN##_##WN(IT *x, WT *w, IT *tx, WT *tw, int64_t size, int nbits,  \
                                      int digit_bits, int64_t *count) {                        \
        const int64_t buckets = (int64_t)1 << digit_bits, mask = buckets - 1;                  \
        IT *sx = x, *dx = tx;                                                                  \
        WT *sw = w, *dw = tw;                                                                  \
        int swapped = 0;                                                                       \
        for (int shift = 0; shift < nbits; shift += digit_bits) {                              \
            memset(count, 0, (size_t)buckets * sizeof *count);                                 \
            for (int64_t e = 0; e < size; ++e) ++count[((int64_t)sx[e] >> shift) & mask];      \
            if (count[((int64_t)sx[0] >> shift) & mask] == size) continue;                     \
            int64_t total = 0;                                                                 \
            for (int64_t d = 0; d < buckets; ++d) {                                            \
                const int64_t c = count[d];                                                    \
                count[d] = total;                                                              \
                total += c;                                                                    \
            }                                                                                  \
            for (int64_t e = 0; e < size; ++e) {                                               \
                const int64_t d = ((int64_t)sx[e] >> shift) & mask;                            \
                dx[count[d]] = sx[e];                                                          \
                if (WITH_W) dw[count[d]] = sw[e];                                              \
                ++count[d];                                                                    \
            }                                                                                  \
            IT *t = sx; sx = dx; dx = t;                                                       \
            WT *tw2 = sw; sw = dw; dw = tw2;                                                   \
            swapped = !swapped;                                                                \
        }                                                                                      \
        if (swapped) {                                                                         \
            memcpy(x, tx, (size_t)size * sizeof *x);                                           \
            if (WITH_W) memcpy(w, tw, (size_t)size * sizeof *w);                               \
        }                                                                                      \
    }                                                                                          \
    int terrain_csr_sort_rows_##IN##_##WN(const int64_t *indptr, int64_t r0, int64_t r1,       \
                                          IT *indices, WT *weights, int nbits,                 \
                                          int64_t *unique_deg) {                               \
        int64_t longest = 0;                                                                   \
        for (int64_t i = r0; i < r1; ++i)                                                      \
            if (indptr[i + 1] - indptr[i] > longest) longest = indptr[i + 1] - indptr[i];      \
        IT *tx = NULL;                                                                         \
        WT *tw = NULL;                                                                         \
        int64_t *count = NULL;                                                                 \
        if (longest > 32) {                                                                    \
            tx = malloc((size_t)longest * sizeof *tx);                                         \
            tw = WITH_W ? malloc((size_t)longest * sizeof *tw) : NULL;                         \
            count = malloc(((size_t)1 << 11) * sizeof *count);                                 \
            if (tx == NULL || count == NULL || (WITH_W && tw == NULL)) {                       \
                free(tx); free(tw); free(count);                                               \
                return -1;                                                                     \
            }                                                                                  \
        }                                                                                      \
        for (int64_t i = r0; i < r1; ++i) {                                                    \
            const int64_t a = indptr[i], b = indptr[i + 1];                                    \
            int64_t e = a + 1;                                                                 \
            while (e < b && indices[e] > indices[e - 1]) ++e;                                  \
            if (e >= b) { /* strictly increasing already: no sort, no duplicates */           \
                unique_deg[i] = b - a;                                                         \
                continue;                                                                      \
            }                                                                                  \
            const int64_t d = b - a;                                                           \
            if (d > 32) {                                                                      \
                csr_radix_##IN##_##WN(indices + a, WITH_W ? weights + a : NULL, tx, tw, d,    \
                                      nbits, d > 16384 ? 11 : 8, count);                       \
            } else {                                                                           \
                for (int64_t f = a + 1; f < b; ++f) {                                          \
                    const IT x = indices[f];                                                   \
                    WT y;                                                                      \
                    if (WITH_W) y = weights[f];                                                \
                    int64_t j = f - 1;                                                         \
                    while (j >= a && indices[j] > x) {                                         \
                        indices[j + 1] = indices[j];                                           \
                        if (WITH_W) weights[j + 1] = weights[j];                               \
                        --j;                                                                   \
                    }                                                                          \
                    indices[j + 1] = x;                                                        \
                    if (WITH_W) weights[j + 1] = y;                                            \
                }                                                                              \
            }                                                                                  \
            int64_t cnt = 0;                                                                   \
            for (int64_t f = a; f < b; ++f) {                                                  \
                if (cnt == 0 || indices[f] != indices[a + cnt - 1]) {                          \
                    indices[a + cnt] = indices[f];                                             \
                    if (WITH_W) weights[a + cnt] = weights[f];                                 \
                    ++cnt;                                                                     \
                } else if (WITH_W && weights[f] < weights[a + cnt - 1]) {                      \
                    weights[a + cnt - 1] = weights[f];                                         \
                }                                                                              \
            }                                                                                  \
            unique_deg[i] = cnt;                                                               \
        }                                                                                      \
        free(tx); free(tw); free(count);                                                       \
        return 0;                                                                              \
    }                                                                                          \
    int64_t terrain_csr_compact_##IN##_##WN(int64_t *indptr, int64_t n, IT *indices,           \
                                            WT *weights, const int64_t *unique_deg) {          \
        int64_t k = 0;                                                                         \
        for (int64_t i = 0; i < n; ++i) {                                                      \
            const int64_t a = indptr[i];                                                       \
            indptr[i] = k;                                                                     \
            if (a != k) {                                                                      \
                memmove(indices + k, indices + a, (size_t)unique_deg[i] * sizeof *indices);    \
                if (WITH_W) memmove(weights + k, weights + a,                                  \
                                    (size_t)unique_deg[i] * sizeof *weights);                  \
            }                                                                                  \
            k += unique_deg[i];                                                                \
        }                                                                                      \
        indptr[n] = k;                                                                         \
        return k;                                                                              \
    }

TERRAIN_CSR_FUNCS(int32_t, i32, uint8_t, none, 0)
TERRAIN_CSR_FUNCS(int32_t, i32, int32_t, i32, 1)
TERRAIN_CSR_FUNCS(int32_t, i32, int64_t, i64, 1)
TERRAIN_CSR_FUNCS(int32_t, i32, float, f32, 1)
TERRAIN_CSR_FUNCS(int32_t, i32, double, f64, 1)
TERRAIN_CSR_FUNCS(int64_t, i64, uint8_t, none, 0)
TERRAIN_CSR_FUNCS(int64_t, i64, int32_t, i32, 1)
TERRAIN_CSR_FUNCS(int64_t, i64, int64_t, i64, 1)
TERRAIN_CSR_FUNCS(int64_t, i64, float, f32, 1)
TERRAIN_CSR_FUNCS(int64_t, i64, double, f64, 1)

/* ---------------------------------------------------------------- BFS operators (CPU twins of
 * seed / fused / bottomup / parents in terrain/graph/_frontier.cu; frontier.py drives them).
 * Each returns (count, degree sum) of the level it builds in out[0..1]. */
#define TERRAIN_BFS_FUNCS(IT, IN)                                                              \
    void terrain_bfs_seed_##IN(const int64_t *indptr, const IT *sources, int64_t k, IT *q,     \
                               int32_t *dist, int64_t *out) {                                  \
        int64_t degsum = 0;                                                                    \
        for (int64_t i = 0; i < k; ++i) {                                                      \
            const IT s = sources[i];                                                           \
            dist[s] = 0;                                                                       \
            q[i] = s;                                                                          \
            degsum += indptr[s + 1] - indptr[s];                                               \
        }                                                                                      \
        out[0] = k;                                                                            \
        out[1] = degsum;                                                                       \
    }                                                                                          \
    void terrain_bfs_topdown_##IN(const int64_t *indptr, const IT *indices, const IT *in_q,    \
                                  int64_t n_in, IT *out_q, int32_t *dist, int32_t level,       \
                                  int64_t *out) {                                              \
        int64_t count = 0, degsum = 0;                                                         \
        const int32_t nxt = level + 1;                                                         \
        for (int64_t i = 0; i < n_in; ++i) {                                                   \
            const IT u = in_q[i];                                                              \
            for (int64_t e = indptr[u]; e < indptr[u + 1]; ++e) {                              \
                const IT w = indices[e];                                                       \
                if (dist[w] < 0) {                                                             \
                    dist[w] = nxt;                                                             \
                    out_q[count++] = w;                                                        \
                    degsum += indptr[w + 1] - indptr[w];                                       \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        out[0] = count;                                                                        \
        out[1] = degsum;                                                                       \
    }                                                                                          \
    void terrain_bfs_bottomup_##IN(const int64_t *indptr, const IT *indices, int64_t n,        \
                                   IT *out_q, int32_t *dist, int32_t level, int64_t *out) {    \
        int64_t count = 0, degsum = 0;                                                         \
        for (int64_t v = 0; v < n; ++v) {                                                      \
            if (dist[v] >= 0) continue;                                                        \
            for (int64_t e = indptr[v]; e < indptr[v + 1]; ++e) {                              \
                if (dist[indices[e]] == level) {                                               \
                    dist[v] = level + 1;                                                       \
                    out_q[count++] = (IT)v;                                                    \
                    degsum += indptr[v + 1] - indptr[v];                                       \
                    break;                                                                     \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        out[0] = count;                                                                        \
        out[1] = degsum;                                                                       \
    }                                                                                          \
    void terrain_bfs_parents_##IN(const int64_t *indptr, const IT *indices, int64_t n,         \
                                  const int32_t *dist, IT *pred) {                             \
        for (int64_t v = 0; v < n; ++v) {                                                      \
            const int32_t d = dist[v];                                                         \
            IT p = -1;                                                                         \
            if (d > 0) {                                                                       \
                for (int64_t e = indptr[v]; e < indptr[v + 1]; ++e) {                          \
                    if (dist[indices[e]] == d - 1) {                                           \
                        p = indices[e];                                                        \
                        break;                                                                 \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
            pred[v] = p;                                                                       \
        }                                                                                      \
    }

TERRAIN_BFS_FUNCS(int32_t, i32)
TERRAIN_BFS_FUNCS(int64_t, i64)

/* Does one bit-parallel batch of k sources cost less than k single BFS? A single BFS costs
 * about 15 ns a vertex and 0.3 ns an arc (the vertex's row, its queue slot and a
 * mispredicted loop exit dominate), a bit-parallel level 5 ns a vertex and 0.7 ns an arc
 * (every vertex's words are swept; a pull stops early); a batch runs at least delta_lower + 1 levels, once with one_pass (its
 * distances kept, 64 bytes a vertex), else twice. In tenths of ns; eccentricity.py's
 * batch_pays is the same rule (the GPU's loop follows it, so both backends pick the same
 * sources). A batch's sources are picked at once from the same bounds, so they settle less
 * than k BFS picked one after another: it must take every candidate left (every: nothing
 * is left to pick better) or be short, 2 (dl + 1) < k (small-world graphs). The ratio
 * single / level is at most 3, so passes (dl + 1) >= 3 k never pays (and keeps the products
 * below 2^63). */
static int bound_batch_pays(int64_t n, int64_t arcs, int64_t delta_lower, int64_t k,
                            int one_pass, int every) {
    const int64_t levels = (one_pass ? 1 : 2) * (delta_lower + 1);
    if (k < 2 || levels >= 3 * k || !(every || 2 * (delta_lower + 1) < k)) return 0;
    return levels * (50 * n + 7 * arcs) < k * (150 * n + 3 * arcs);
}

/* ---------------------------------------------------------------- the CPU's enactors: a whole
 * BFS, up to 64 BFS at once, components, the diameter's bounding loop (terrain/graph/frontier.py
 * and eccentricity.py call them; the GPU's twins are _frontier.cu's step_* and bitwise_*
 * kernels and _diameter.cu's, driven from Python).
 *
 * terrain_bfs_levels: seed, then one level at a time: bottom-up when the frontier's edges exceed
 * the unexplored edges / alpha and n / 4 (a bottom-up level reads every vertex's label) and the
 * frontier grows, top-down again when it holds fewer than n / beta vertices and shrinks
 * (Beamer's rule, as step_decide). levels[3 L + 0..2]: vertices,
 * degree sum and operator (0 sources, 1 top-down, 2 bottom-up) of level L < cap; *reached: the
 * vertices reached; returns the levels. */
#define TERRAIN_ENACTOR_FUNCS(IT, IN)                                                          \
    int64_t terrain_bfs_levels_##IN(const int64_t *indptr, const IT *indices, int64_t n,       \
                                    const IT *sources, int64_t k, IT *q0, IT *q1,              \
                                    int32_t *dist, int64_t alpha, int64_t beta,                \
                                    int64_t *levels, int64_t cap, int64_t *reached) {          \
        memset(dist, 0xFF, (size_t)n * sizeof *dist);                                          \
        int64_t out[2];                                                                        \
        terrain_bfs_seed_##IN(indptr, sources, k, q0, dist, out);                              \
        const int64_t nnz = indptr[n];                                                         \
        int64_t nf = out[0], mf = out[1], explored = mf, prev = 0, nl = 1;                     \
        *reached = nf;                                                                         \
        if (cap > 0) {                                                                         \
            levels[0] = nf;                                                                    \
            levels[1] = mf;                                                                    \
            levels[2] = 0;                                                                     \
        }                                                                                      \
        int bottom = 0;                                                                        \
        IT *cur = q0, *nxt = q1;                                                               \
        while (nf > 0) {                                                                       \
            const int growing = nl < 2 || nf > prev;                                           \
            if (!bottom && growing && mf * alpha > nnz - explored && 4 * mf > n) bottom = 1;   \
            else if (bottom && !growing && nf * beta < n) bottom = 0;                          \
            if (bottom)                                                                        \
                terrain_bfs_bottomup_##IN(indptr, indices, n, nxt, dist, (int32_t)(nl - 1),    \
                                          out);                                                \
            else                                                                               \
                terrain_bfs_topdown_##IN(indptr, indices, cur, nf, nxt, dist,                  \
                                         (int32_t)(nl - 1), out);                              \
            if (out[0] == 0) break;                                                            \
            if (nl < cap) {                                                                    \
                levels[3 * nl] = out[0];                                                       \
                levels[3 * nl + 1] = out[1];                                                   \
                levels[3 * nl + 2] = bottom ? 2 : 1;                                           \
            }                                                                                  \
            *reached += out[0];                                                                \
            prev = nf;                                                                         \
            nf = out[0];                                                                       \
            mf = out[1];                                                                       \
            explored += mf;                                                                    \
            ++nl;                                                                              \
            IT *t = cur; cur = nxt; nxt = t;                                                   \
        }                                                                                      \
        return nl;                                                                             \
    }                                                                                          \
    /* Up to 64 BFS at once, bit i for sources[i] (seen, frontier, nxt: n words of scratch):   \
     * a level is nxt[v] = OR(frontier[u], u a neighbour) & ~seen[v]: pushed from the vertices \
     * with new bits while their arcs are few (< 1/14 of all), else pulled by every vertex,    \
     * its scan stopped once every bit it lacks is found. ecc_out[i]: source i's eccentricity. With ecc (those  \
     * eccentricities, from an earlier call) each vertex w reached at distance d from source i \
     * gets lower[w] = max(lower[w], d, ecc[i] - d), upper[w] = min(upper[w], ecc[i] + d): the \
     * bounds the k single BFS would leave. pairs (n + 1 slots, or NULL): the (source, vertex) \
     * pairs at each distance. dmat (64 n bytes, or NULL; levels < 255): dmat[64 v + i] the    \
     * distance from source i to v, 255 unreached. Returns the levels. */                      \
    int64_t terrain_bitwise_bfs_##IN(const int64_t *indptr, const IT *indices, int64_t n,      \
                                     const int64_t *sources, int64_t k, uint64_t *seen,        \
                                     uint64_t *frontier, uint64_t *nxt, const int32_t *ecc,    \
                                     int32_t *lower, int32_t *upper, int32_t *ecc_out,         \
                                     int64_t *pairs, uint8_t *dmat) {                          \
        const uint64_t full = k >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << k) - 1);               \
        memset(seen, 0, (size_t)n * sizeof *seen);                                             \
        memset(frontier, 0, (size_t)n * sizeof *frontier);                                     \
        memset(nxt, 0, (size_t)n * sizeof *nxt);                                               \
        if (dmat != NULL) memset(dmat, 0xFF, (size_t)n * 64);                                  \
        for (int64_t i = 0; i < k; ++i) {                                                      \
            const int64_t s = sources[i];                                                      \
            seen[s] = frontier[s] = (uint64_t)1 << i;                                          \
            ecc_out[i] = 0;                                                                    \
            if (dmat != NULL) dmat[s * 64 + i] = 0;                                            \
            if (ecc != NULL) {                                                                 \
                if (ecc[i] > lower[s]) lower[s] = ecc[i];                                      \
                if (ecc[i] < upper[s]) upper[s] = ecc[i];                                      \
            }                                                                                  \
        }                                                                                      \
        if (pairs != NULL) pairs[0] = k;                                                       \
        int64_t active = 0; /* arcs of the vertices with new bits */                           \
        for (int64_t i = 0; i < k; ++i) active += indptr[sources[i] + 1] - indptr[sources[i]]; \
        for (int32_t level = 1;; ++level) {                                                    \
            if (active * 14 < indptr[n]) { /* few new bits: push them to the neighbours */     \
                for (int64_t u = 0; u < n; ++u) {                                              \
                    const uint64_t f = frontier[u];                                            \
                    if (f == 0) continue;                                                      \
                    for (int64_t e = indptr[u]; e < indptr[u + 1]; ++e) nxt[indices[e]] |= f;  \
                }                                                                              \
            } else { /* else every vertex pulls, until it has every bit */                     \
                for (int64_t v = 0; v < n; ++v) {                                              \
                    const uint64_t s = seen[v];                                                \
                    uint64_t acc = 0;                                                          \
                    if (s != full) {                                                           \
                        for (int64_t e = indptr[v]; e < indptr[v + 1]; ++e) {                  \
                            acc |= frontier[indices[e]];                                       \
                            if ((acc | s) == full) break;                                      \
                        }                                                                      \
                    }                                                                          \
                    nxt[v] = acc;                                                              \
                }                                                                              \
            }                                                                                  \
            uint64_t any = 0;                                                                  \
            int64_t count = 0;                                                                 \
            active = 0;                                                                        \
            for (int64_t v = 0; v < n; ++v) {                                                  \
                const uint64_t fresh = nxt[v] & ~seen[v];                                      \
                nxt[v] = 0;                                                                    \
                frontier[v] = fresh;                                                           \
                if (fresh == 0) continue;                                                      \
                active += indptr[v + 1] - indptr[v];                                           \
                seen[v] |= fresh;                                                              \
                any |= fresh;                                                                  \
                uint64_t m = fresh;                                                            \
                while (m) {                                                                    \
                    const int i = g_ctz64(m);                                                  \
                    m &= m - 1;                                                                \
                    ++count;                                                                   \
                    if (dmat != NULL) dmat[v * 64 + i] = (uint8_t)level;                       \
                    if (ecc != NULL) {                                                         \
                        const int32_t far = ecc[i] - level > level ? ecc[i] - level : level;   \
                        if (far > lower[v]) lower[v] = far;                                    \
                        if (ecc[i] + level < upper[v]) upper[v] = ecc[i] + level;              \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
            if (any == 0) return level;                                                        \
            if (pairs != NULL) pairs[level] = count;                                           \
            for (int64_t i = 0; i < k; ++i)                                                    \
                if (any >> i & 1u) ecc_out[i] = level;                                         \
        }                                                                                      \
    }                                                                                          \
    /* Union-find labels: parent[v] = the smallest vertex of v's (weakly connected) component \
     * (hook_edges' twin in _diameter.cu); symmetric: every arc is listed both ways. */       \
    void terrain_component_roots_##IN(const int64_t *indptr, const IT *indices, int64_t n,     \
                                      int symmetric, IT *parent) {                             \
        for (int64_t v = 0; v < n; ++v) parent[v] = (IT)v;                                     \
        for (int64_t u = 0; u < n; ++u) {                                                      \
            for (int64_t e = indptr[u]; e < indptr[u + 1]; ++e) {                              \
                int64_t a = u, b = indices[e];                                                 \
                if (symmetric && b >= u) continue; /* the arc's twin in row b joins them */    \
                while (parent[a] != a) { parent[a] = parent[parent[a]]; a = parent[a]; }       \
                while (parent[b] != b) { parent[b] = parent[parent[b]]; b = parent[b]; }       \
                if (a != b) parent[a > b ? a : b] = (IT)(a < b ? a : b);                       \
            }                                                                                  \
        }                                                                                      \
        for (int64_t v = 0; v < n; ++v) {                                                      \
            int64_t r = parent[v];                                                             \
            while (parent[r] != r) r = parent[r];                                              \
            parent[v] = (IT)r;                                                                 \
        }                                                                                      \
    }                                                                                          \
    /* The induced subgraph on the vertices with new_id >= 0 (new ids increasing, so rows stay \
     * sorted): with out_indices NULL, only its arc count; else its rows, and the weights of   \
     * its arcs (w_size bytes each; 0: none). Returns the arcs. */                             \
    int64_t terrain_subgraph_##IN(const int64_t *indptr, const IT *indices, int64_t n,         \
                                  const int64_t *new_id, int64_t *out_indptr, IT *out_indices, \
                                  const char *w, char *out_w, int64_t w_size) {                \
        int64_t k = 0, r = 0;                                                                  \
        if (out_indptr != NULL) out_indptr[0] = 0;                                             \
        for (int64_t v = 0; v < n; ++v) {                                                      \
            if (new_id[v] < 0) continue;                                                       \
            for (int64_t e = indptr[v]; e < indptr[v + 1]; ++e) {                              \
                const int64_t x = new_id[indices[e]];                                          \
                if (x < 0) continue;                                                           \
                if (out_indices != NULL) {                                                     \
                    out_indices[k] = (IT)x;                                                    \
                    if (w_size) memcpy(out_w + k * w_size, w + e * w_size, (size_t)w_size);    \
                }                                                                              \
                ++k;                                                                           \
            }                                                                                  \
            if (out_indptr != NULL) out_indptr[++r] = k;                                       \
        }                                                                                      \
        return k;                                                                              \
    }                                                                                          \
    /* The bounding loop of terrain/graph/eccentricity.py on a connected graph, for at most    \
     * rounds searches (a BFS, or, after the first single_bfs, a batch of k <= 64 bit-parallel \
     * ones when bound_batch_pays says it costs less than k BFS). The next single source       \
     * alternates (bound_select) between a far one, the candidate of largest upper bound, and  \
     * a central one near it, the vertex of smallest lower bound + distance from the last      \
     * source; a batch takes candidates in turn from the largest-upper and smallest-lower      \
     * orders. dist keeps the last single BFS's distances, centre_dist those of the single     \
     * source of smallest eccentricity (for bound_cover). state: [0] searches so far, [1]      \
     * next pick (1: far), [2] best eccentricity (-1: none), [3] its source, [4] best_dist     \
     * holds its labels, [5] candidates left, [6] delta_lower, [7] radius_upper, [8] the       \
     * centre's eccentricity, [9] the last single source's. Returns 0, or -2 when a BFS did    \
     * not reach every vertex. */                                                              \
    int64_t terrain_diameter_bound_##IN(                                                       \
        const int64_t *indptr, const IT *indices, int64_t n, int extremes, int64_t single_bfs, \
        int64_t batch, int64_t rounds, int64_t alpha, int64_t beta, int32_t *lower,            \
        int32_t *upper, uint8_t *cand, int32_t *dist, int32_t *best_dist, IT *q0, IT *q1,      \
        uint64_t *seen, uint64_t *frontier, uint64_t *nxt, int64_t *chosen,                    \
        int64_t *by_upper, int64_t *by_lower, int32_t *eccs, int32_t *eccs2, uint8_t *dmat,    \
        int32_t *centre_dist, int64_t *state) {                                                \
        for (int64_t round = 0; round < rounds && state[5] > 0; ++round) {                     \
            const int64_t k_max = state[5] < batch ? state[5] : batch;                         \
            const int one_pass = dmat != NULL && 2 * state[6] <= 254;                          \
            if (state[0] < single_bfs                                                          \
                || !bound_batch_pays(n, indptr[n], state[6], k_max, one_pass,                  \
                                     k_max == state[5])) {                                     \
                int64_t v = bound_select(indptr, n, cand, lower, upper,                        \
                                         state[0] > 0 ? dist : NULL, (int)state[1]);           \
                if (v < 0) v = bound_select(indptr, n, cand, lower, upper, NULL, 1);           \
                if (state[0] > 0) state[1] = !state[1]; /* the first two are far picks */      \
                const IT src = (IT)v;                                                          \
                int64_t reached = 0;                                                           \
                const int64_t nl = terrain_bfs_levels_##IN(indptr, indices, n, &src, 1, q0,    \
                                                           q1, dist, alpha, beta, NULL, 0,     \
                                                           &reached);                          \
                if (reached != n) return -2;                                                   \
                const int32_t ecc = (int32_t)(nl - 1);                                         \
                state[0] += 1;                                                                 \
                state[9] = ecc;                                                                \
                if (state[2] < 0 || ecc > state[2]) {                                          \
                    state[2] = ecc;                                                            \
                    state[3] = v;                                                              \
                    state[4] = 1;                                                              \
                    memcpy(best_dist, dist, (size_t)n * sizeof *dist);                         \
                }                                                                              \
                if (ecc < state[8]) {                                                          \
                    state[8] = ecc;                                                            \
                    memcpy(centre_dist, dist, (size_t)n * sizeof *dist);                       \
                }                                                                              \
                for (int64_t w = 0; w < n; ++w) {                                              \
                    const int32_t d = dist[w], far = ecc - d > d ? ecc - d : d;                \
                    if (d < 0) continue;                                                       \
                    if (far > lower[w]) lower[w] = far;                                        \
                    if (ecc + d < upper[w]) upper[w] = ecc + d;                                \
                }                                                                              \
            } else {                                                                           \
                const int64_t k = bound_select_batch(indptr, n, cand, lower, upper, batch,     \
                                                     chosen, by_upper, by_lower);              \
                terrain_bitwise_bfs_##IN(indptr, indices, n, chosen, k, seen, frontier, nxt,   \
                                         NULL, NULL, NULL, eccs, NULL,                         \
                                         one_pass ? dmat : NULL);                              \
                state[0] += k;                                                                 \
                int64_t top = 0;                                                               \
                for (int64_t i = 1; i < k; ++i)                                                \
                    if (eccs[i] > eccs[top]) top = i;                                          \
                if (state[2] < 0 || eccs[top] > state[2]) {                                    \
                    state[2] = eccs[top];                                                      \
                    state[3] = chosen[top];                                                    \
                    state[4] = one_pass; /* its labels are the kept distances' column top */   \
                    for (int64_t w = 0; w < n && one_pass; ++w)                                \
                        best_dist[w] = dmat[w * 64 + top];                                     \
                }                                                                              \
                if (!one_pass) { /* a second pass applies the bounds as the bits appear */     \
                    terrain_bitwise_bfs_##IN(indptr, indices, n, chosen, k, seen, frontier,    \
                                             nxt, eccs, lower, upper, eccs2, NULL, NULL);      \
                } else { /* or the first pass's distances do */                                \
                    for (int64_t w = 0; w < n; ++w) {                                          \
                        const uint8_t *dw = dmat + w * 64;                                     \
                        for (int64_t i = 0; i < k; ++i) {                                      \
                            if (dw[i] == 0xFF) continue;                                       \
                            const int32_t d = dw[i], e = eccs[i], far = e - d > d ? e - d : d; \
                            if (far > lower[w]) lower[w] = far;                                \
                            if (e + d < upper[w]) upper[w] = e + d;                            \
                        }                                                                      \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
            bound_prune(n, extremes, cand, lower, upper, state);                               \
            /* the cover bound from the centre, then from the last single source */            \
            if (bound_cover(n, cand, centre_dist, (int32_t)state[8], upper, state)             \
                | bound_cover(n, cand, dist, (int32_t)state[9], upper, state))                 \
                bound_prune(n, extremes, cand, lower, upper, state);                           \
        }                                                                                      \
        return 0;                                                                              \
    }

/* Does (key, degree, vertex) a come before b? Larger key first when descending, else smaller;
 * then higher degree, then lower number. */
static inline int bound_before(int64_t ka, int64_t da, int64_t a, int64_t kb, int64_t db,
                               int64_t b, int descending) {
    if (ka != kb) return descending ? ka > kb : ka < kb;
    if (da != db) return da > db;
    return a < b;
}

/* The next single source. far: the candidate first in (largest upper bound, largest distance
 * from the last source, higher degree, lower number). Else central: of every vertex but the
 * last source, the first in (smallest lower bound + distance from the last source, largest
 * such distance, higher degree, lower number) -- a vertex whose search can tighten the far
 * source's neighbourhood (Borassi et al.'s SumSweep selection; it needs not be a candidate).
 * last: the last single BFS's distances, NULL before the first. A far pick settles its own
 * eccentricity, so the loop ends however the central picks fall. */
static int64_t bound_select(const int64_t *indptr, int64_t n, const uint8_t *cand,
                            const int32_t *lower, const int32_t *upper, const int32_t *last,
                            int far) {
    int64_t best = -1, bk = 0, bl = 0, bd = 0;
    for (int64_t v = 0; v < n; ++v) {
        const int64_t l = last != NULL ? last[v] : 0;
        if (far ? !cand[v] : l <= 0) continue;
        const int64_t key = far ? upper[v] : -(int64_t)lower[v] - l;
        const int64_t d = indptr[v + 1] - indptr[v];
        if (best < 0 || key > bk || (key == bk && (l > bl || (l == bl && d > bd)))) {
            best = v;
            bk = key;
            bl = l;
            bd = d;
        }
    }
    return best;
}

/* The first k candidates in one order (insertion into a sorted list of k: most candidates
 * are turned away by the comparison with its last). */
static int64_t bound_top(const int64_t *indptr, int64_t n, const uint8_t *cand,
                         const int32_t *key, int descending, int64_t k, int64_t *top) {
    int64_t size = 0;
    for (int64_t v = 0; v < n; ++v) {
        if (!cand[v]) continue;
        const int64_t kv = key[v], dv = indptr[v + 1] - indptr[v];
#define BOUND_BEFORE_AT(j) bound_before(kv, dv, v, key[top[j]],                                \
                                        indptr[top[j] + 1] - indptr[top[j]], top[j], descending)
        if (size == k && !BOUND_BEFORE_AT(k - 1)) continue;
        int64_t j = size < k ? size++ : k - 1;
        while (j > 0 && BOUND_BEFORE_AT(j - 1)) {
            top[j] = top[j - 1];
            --j;
        }
#undef BOUND_BEFORE_AT
        top[j] = v;
    }
    return size;
}

/* Up to k candidates for one bit-parallel batch: all of them (by number) when they are no more
 * than k, else taken in turn from the largest-upper and the smallest-lower order, each once. */
static int64_t bound_select_batch(const int64_t *indptr, int64_t n, const uint8_t *cand,
                                  const int32_t *lower, const int32_t *upper, int64_t k,
                                  int64_t *chosen, int64_t *by_upper, int64_t *by_lower) {
    int64_t count = 0;
    for (int64_t v = 0; v < n && count <= k; ++v) count += cand[v] != 0;
    if (count <= k) {
        int64_t j = 0;
        for (int64_t v = 0; v < n; ++v)
            if (cand[v]) chosen[j++] = v;
        return j;
    }
    bound_top(indptr, n, cand, upper, 1, k, by_upper);
    bound_top(indptr, n, cand, lower, 0, k, by_lower);
    int64_t size = 0;
    for (int64_t i = 0; i < k && size < k; ++i) {
        const int64_t pair[2] = {by_upper[i], by_lower[i]};
        for (int t = 0; t < 2 && size < k; ++t) {
            int seen = 0;
            for (int64_t j = 0; j < size && !seen; ++j) seen = chosen[j] == pair[t];
            if (!seen) chosen[size++] = pair[t];
        }
    }
    return size;
}

/* delta_lower = max lower, radius_upper = min upper; a candidate stays while its eccentricity
 * is open and can still matter (prune_candidates in _diameter.cu). */
static void bound_prune(int64_t n, int extremes, uint8_t *cand, const int32_t *lower,
                        const int32_t *upper, int64_t *state) {
    int32_t dl = 0, ru = INT32_MAX;
    for (int64_t v = 0; v < n; ++v) {
        if (lower[v] > dl) dl = lower[v];
        if (upper[v] < ru) ru = upper[v];
    }
    int64_t left = 0;
    for (int64_t v = 0; v < n; ++v) {
        if (!cand[v]) continue;
        const int32_t lo = lower[v], up = upper[v];
        const int keep = lo != up && (extremes ? (up >= dl || lo <= ru) : up > dl);
        if (keep) ++left;
        else cand[v] = 0;
    }
    state[5] = left;
    state[6] = dl;
    state[7] = ru;
}

/* The cover bound from the distances d(c, .) of one single source c. Every vertex x outside
 * the candidates has ecc(x) <= delta_lower, so a longer shortest path joins two candidates
 * w, x, and d(w, x) <= d(c, w) + d(c, x): ecc(w) <= max(delta_lower, d(c, w) + M), M the
 * largest d(c, x) over the candidates. Smaller than Takes & Kosters' ecc(c) + d(c, w) once
 * the candidates left lie nearer c than its farthest vertex: from the centre (the single
 * source of smallest eccentricity) when they are central, from the last source when they
 * cluster around it. Returns whether an upper bound fell. */
static int bound_cover(int64_t n, const uint8_t *cand, const int32_t *dc, int32_t ecc_c,
                       int32_t *upper, const int64_t *state) {
    if (state[5] == 0) return 0;
    int32_t reach = 0;
    for (int64_t v = 0; v < n; ++v)
        if (cand[v] && dc[v] > reach) reach = dc[v];
    if (reach >= ecc_c) return 0; /* no lower than ecc(c) + d(c, w), applied with c's search */
    const int32_t dl = (int32_t)state[6];
    int fell = 0;
    for (int64_t v = 0; v < n; ++v) {
        const int32_t t = dc[v] + reach > dl ? dc[v] + reach : dl;
        if (t < upper[v]) {
            upper[v] = t;
            fell = 1;
        }
    }
    return fell;
}

TERRAIN_ENACTOR_FUNCS(int32_t, i32)
TERRAIN_ENACTOR_FUNCS(int64_t, i64)

/* ---------------------------------------------------------------- the graph MST's CPU operators
 * (terrain/graph/mst.py _CpuOps, sequential twins of _mst.cu's count_upper / extract / offer /
 * join; mst.py states the algorithm).
 *
 * terrain_mst_upper: rows r0..r1: count[r - r0] = the row's arcs to larger vertices (a suffix:
 * rows are sorted), their heads to ev and their weights (w_size bytes each; w_kind 2 float32,
 * 3 float64: a NaN is noted) to w_e, from 0 on. out[0] = the arcs written (-1: more than cap),
 * out[1] = whether a weight is NaN.
 * terrain_mst_extract: eu[e] = the tail of edge e (ids count up row by row) and its key: mode 2
 * the id, mode 1 the rank of its weight (int32: w + 2^31; float32 bits, w_kind 2: the order
 * bits, -0.0 as +0.0) << id_bits | id; mode 0 none (the caller makes them). Returns the edges.
 * terrain_mst_offer: the worklist's edges between two components, as (root, root, key), into
 * out; each offers its key to both roots. Returns their number.
 * terrain_mst_join: every edge that won at one of its roots joins their components and enters
 * the forest. */
#define TERRAIN_MST_FUNCS(IT, IN)                                                              \
    void terrain_mst_upper_##IN(const int64_t *indptr, const IT *indices, const char *w,       \
                                int64_t w_size, int w_kind, int64_t r0, int64_t r1, IT *count, \
                                IT *ev, char *w_e, int64_t cap, int64_t *out) {                \
        int64_t e = 0;                                                                         \
        int nan = 0;                                                                           \
        for (int64_t r = r0; r < r1; ++r) {                                                    \
            const int64_t start = indptr[r], end = indptr[r + 1];                              \
            int64_t lo = end;                                                                  \
            while (lo > start && indices[lo - 1] > r) --lo;                                    \
            const int64_t c = end - lo;                                                        \
            count[r - r0] = (IT)c;                                                             \
            if (e + c > cap) {                                                                 \
                out[0] = -1;                                                                   \
                out[1] = nan;                                                                  \
                return;                                                                        \
            }                                                                                  \
            memcpy(ev + e, indices + lo, (size_t)c * sizeof *ev);                              \
            if (w_size) {                                                                      \
                memcpy(w_e + e * w_size, w + lo * w_size, (size_t)(c * w_size));              \
                for (int64_t k = 0; k < c && w_kind >= 2; ++k) {                               \
                    if (w_kind == 2) {                                                         \
                        float x;                                                               \
                        memcpy(&x, w + (lo + k) * 4, 4);                                       \
                        nan |= x != x;                                                         \
                    } else {                                                                   \
                        double x;                                                              \
                        memcpy(&x, w + (lo + k) * 8, 8);                                       \
                        nan |= x != x;                                                         \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
            e += c;                                                                            \
        }                                                                                      \
        out[0] = e;                                                                            \
        out[1] = nan;                                                                          \
    }                                                                                          \
    int64_t terrain_mst_extract_##IN(const IT *count, int64_t n, const void *w_e,              \
                                     int key_mode, int w_kind, int id_bits, IT *eu,            \
                                     int64_t *key) {                                           \
        int64_t e = 0;                                                                         \
        for (int64_t r = 0; r < n; ++r) {                                                      \
            for (int64_t j = 0; j < (int64_t)count[r]; ++j, ++e) {                             \
                eu[e] = (IT)r;                                                                 \
                if (key_mode == 2) {                                                           \
                    key[e] = e;                                                                \
                } else if (key_mode == 1) {                                                    \
                    int64_t rank;                                                              \
                    if (w_kind == 2) {                                                         \
                        uint32_t b = ((const uint32_t *)w_e)[e];                               \
                        if (b == 0x80000000u) b = 0; /* -0.0 ranks as +0.0 */                  \
                        rank = (b & 0x80000000u) ? (int64_t)(~b) : (int64_t)(b | 0x80000000u); \
                    } else {                                                                   \
                        rank = (int64_t)((const int32_t *)w_e)[e] + 2147483648LL;             \
                    }                                                                          \
                    key[e] = (rank << id_bits) | e;                                            \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        return e;                                                                              \
    }                                                                                          \
    static inline IT mst_find_##IN(IT x, IT *parent) {                                         \
        IT p = parent[x];                                                                      \
        while (p != x) {                                                                       \
            const IT pp = parent[p];                                                           \
            if (pp == p) return p;                                                             \
            parent[x] = pp; /* path halving */                                                 \
            x = pp;                                                                            \
            p = parent[x];                                                                     \
        }                                                                                      \
        return x;                                                                              \
    }                                                                                          \
    int64_t terrain_mst_offer_##IN(const IT *in_a, const IT *in_b, const int64_t *in_key,      \
                                   int64_t n_in, int64_t lo, int64_t hi, IT *parent,           \
                                   int64_t *best, IT *out_a, IT *out_b, int64_t *out_key) {    \
        int64_t n_out = 0;                                                                     \
        for (int64_t i = 0; i < n_in; ++i) {                                                   \
            const int64_t k = in_key[i];                                                       \
            if (k <= lo || k > hi) continue;                                                   \
            const IT ra = mst_find_##IN(in_a[i], parent), rb = mst_find_##IN(in_b[i], parent);  \
            if (ra == rb) continue;                                                            \
            out_a[n_out] = ra;                                                                 \
            out_b[n_out] = rb;                                                                 \
            out_key[n_out++] = k;                                                              \
            if (k < best[ra]) best[ra] = k;                                                    \
            if (k < best[rb]) best[rb] = k;                                                    \
        }                                                                                      \
        return n_out;                                                                          \
    }                                                                                          \
    void terrain_mst_join_##IN(const IT *wl_a, const IT *wl_b, const int64_t *wl_key,          \
                               int64_t n, IT *parent, int64_t *best, int64_t id_mask,          \
                               uint8_t *in_forest) {                                           \
        for (int64_t i = 0; i < n; ++i) {                                                      \
            const int64_t k = wl_key[i];                                                       \
            IT a = wl_a[i], b = wl_b[i];                                                       \
            const int won_a = best[a] == k, won_b = best[b] == k;                              \
            if (!(won_a || won_b)) continue;                                                   \
            if (won_a) best[a] = INT64_MAX;                                                    \
            if (won_b) best[b] = INT64_MAX;                                                    \
            in_forest[k & id_mask] = 1;                                                        \
            while (parent[a] != a) a = parent[a];                                              \
            while (parent[b] != b) b = parent[b];                                              \
            if (a != b) {                                                                      \
                if (a > b) { const IT t = a; a = b; b = t; }                                   \
                parent[b] = a;                                                                 \
            }                                                                                  \
        }                                                                                      \
    }

TERRAIN_MST_FUNCS(int32_t, i32)
TERRAIN_MST_FUNCS(int64_t, i64)

/* ---------------------------------------------------------------- NetworkX's own orders, for
 * terrain/nx_backend: the graph as NetworkX iterates it (rows in G._adj order), the results
 * in the order NetworkX produces them.
 *
 * terrain_nx_bfs: BFS in discovery order. order[0:k] holds the sources (distinct, in the
 * order NetworkX takes them) at level 0; each vertex, in queue order, appends its unvisited
 * neighbours in row order (nx.bfs_layers, single_source_shortest_path_length). dist[v]: the
 * level, -1 unreached. Returns the vertices reached, order[0:count]. */
int64_t terrain_nx_bfs(const int64_t *indptr, const int64_t *indices, int64_t n, int64_t k,
                       int64_t *order, int32_t *dist) {
    memset(dist, 0xFF, (size_t)n * sizeof *dist);
    for (int64_t i = 0; i < k; ++i) dist[order[i]] = 0;
    int64_t head = 0, tail = k;
    while (head < tail) {
        const int64_t v = order[head++];
        const int32_t d = dist[v] + 1;
        for (int64_t e = indptr[v]; e < indptr[v + 1]; ++e) {
            const int64_t w = indices[e];
            if (dist[w] < 0) {
                dist[w] = d;
                order[tail++] = w;
            }
        }
    }
    return tail;
}

/* A number as Python holds it in NetworkX's Dijkstra: an int (int64 here) or a float. */
typedef struct {
    int64_t i;
    double f;
    int isf;
} nx_num;

/* -1, 0, 1 as Python compares a and b exactly (an int and a float too; no NaN here). */
static int nx_cmp(nx_num a, nx_num b) {
    if (!a.isf && !b.isf) return (a.i > b.i) - (a.i < b.i);
    if (a.isf && b.isf) return (a.f > b.f) - (a.f < b.f);
    const int flip = a.isf; /* compare int x with float y, then flip back */
    const int64_t x = flip ? b.i : a.i;
    const double y = flip ? a.f : b.f;
    int c;
    if (y >= 9223372036854775808.0) c = -1;
    else if (y < -9223372036854775808.0) c = 1;
    else {
        int64_t yi = (int64_t)y; /* toward zero, then down: floor(y) */
        if ((double)yi > y) --yi;
        if (x < yi) c = -1;
        else if (x > yi) c = 1;
        else c = (double)yi == y ? 0 : -1; /* x == floor(y) < y when y has a fraction */
    }
    return flip ? -c : c;
}

typedef struct {
    nx_num d;
    int64_t c;
    int64_t v;
} nx_entry;

static inline int nx_before(const nx_entry *a, const nx_entry *b) {
    const int c = nx_cmp(a->d, b->d);
    return c < 0 || (c == 0 && a->c < b->c);
}

static void nx_push(nx_entry *heap, int64_t *size, nx_entry x) {
    int64_t i = (*size)++;
    while (i > 0) {
        const int64_t p = (i - 1) / 2;
        if (!nx_before(&x, &heap[p])) break;
        heap[i] = heap[p];
        i = p;
    }
    heap[i] = x;
}

static nx_entry nx_pop(nx_entry *heap, int64_t *size) {
    const nx_entry top = heap[0], x = heap[--(*size)];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= *size) break;
        if (c + 1 < *size && nx_before(&heap[c + 1], &heap[c])) ++c;
        if (!nx_before(&heap[c], &x)) break;
        heap[i] = heap[c];
        i = c;
    }
    if (*size > 0) heap[i] = x;
    return top;
}

/* NetworkX's _dijkstra_multisource step by step: a heap of (distance, push count, vertex),
 * a vertex's distance final when popped, a neighbour pushed when first seen or improved;
 * arc weights of kind 0 (int, w_int), 1 (float, w_flt), 2 (NetworkX raises when it reads or
 * adds it: a string), 3 (None: the arc is hidden); sums follow Python (int + int an
 * int, anything with a float a float). cutoff: kind 0 none, 1 int, 2 float; target: stop when
 * it is popped (-1: none). out: the popped vertices in order; their distances in d_i / d_f
 * / d_isf. Returns the count, or -1 (contradictory paths: a negative weight), -2 (an arc of
 * kind 2 reached: err[0] the vertex, err[1] the arc), -3 (an int sum beyond 64 bits), -4
 * (no memory). */
int64_t terrain_nx_dijkstra(const int64_t *indptr, const int64_t *indices, int64_t n,
                            const uint8_t *kind, const int64_t *w_int, const double *w_flt,
                            const int64_t *sources, int64_t k, int cutoff_kind,
                            int64_t cutoff_i, double cutoff_f, int64_t target, int64_t *out,
                            int64_t *d_i, double *d_f, uint8_t *d_isf, int64_t *err) {
    const int64_t cap = indptr[n] + k + 1;
    nx_entry *heap = malloc((size_t)cap * sizeof *heap);
    nx_num *seen = malloc((size_t)(n > 0 ? n : 1) * sizeof *seen);
    uint8_t *state = calloc((size_t)(n > 0 ? n : 1), 1); /* 1 seen, 2 done */
    if (heap == NULL || seen == NULL || state == NULL) {
        free(heap); free(seen); free(state);
        return -4;
    }
    const nx_num cutoff = {cutoff_i, cutoff_f, cutoff_kind == 2};
    int64_t size = 0, count = 0, pushes = 0, rc = 0;
    for (int64_t s = 0; s < k; ++s) {
        const nx_num zero = {0, 0.0, 0};
        seen[sources[s]] = zero;
        state[sources[s]] = 1;
        const nx_entry x = {zero, pushes++, sources[s]};
        nx_push(heap, &size, x);
    }
    while (size > 0) {
        const nx_entry top = nx_pop(heap, &size);
        const int64_t v = top.v;
        if (state[v] == 2) continue;
        state[v] = 2;
        seen[v] = top.d; /* the final distance */
        out[count++] = v;
        d_i[v] = top.d.i;
        d_f[v] = top.d.f;
        d_isf[v] = (uint8_t)top.d.isf;
        if (v == target) break;
        for (int64_t e = indptr[v]; e < indptr[v + 1]; ++e) {
            if (kind[e] == 3) continue;
            if (kind[e] == 2) {
                err[0] = v;
                err[1] = e;
                rc = -2;
                goto done;
            }
            nx_num vu;
            if (kind[e] == 0 && !top.d.isf) {
                vu.isf = 0;
                vu.f = 0.0;
                if (__builtin_add_overflow(top.d.i, w_int[e], &vu.i)) {
                    rc = -3;
                    goto done;
                }
            } else {
                const double a = top.d.isf ? top.d.f : (double)top.d.i;
                const double b = kind[e] == 1 ? w_flt[e] : (double)w_int[e];
                vu.isf = 1;
                vu.i = 0;
                vu.f = a + b;
            }
            if (cutoff_kind && nx_cmp(vu, cutoff) > 0) continue;
            const int64_t u = indices[e];
            if (state[u] == 2) {
                if (nx_cmp(vu, seen[u]) < 0) {
                    rc = -1;
                    goto done;
                }
            } else if (state[u] == 0 || nx_cmp(vu, seen[u]) < 0) {
                state[u] = 1;
                seen[u] = vu;
                const nx_entry x = {vu, pushes++, u};
                nx_push(heap, &size, x);
            }
        }
    }
    rc = count;
done:
    free(heap); free(seen); free(state);
    return rc;
}

/* ---------------------------------------------------------------- result tables as text
 * (terrain/graph/results.py's CSV, generators.write_int_rows): rows r0..r1 of ncols columns,
 * int64 (kind 0) or float64 (kind 1, "%.17g": it reads back to the same bits; an integral
 * value with ".0", so that pandas and pyarrow read a real column as reals whatever its
 * values), separated by sep, each row ended by LF, into out (at most 26 bytes a value);
 * returns the bytes written. */
#include <stdio.h>
static inline char *fmt_int(char *p, int64_t x) {
    char digits[20];
    uint64_t u = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
    int nd = 0;
    do {
        digits[nd++] = (char)('0' + u % 10u);
        u /= 10u;
    } while (u);
    if (x < 0) *p++ = '-';
    while (nd) *p++ = digits[--nd];
    return p;
}

int64_t terrain_format_rows(const void *const *cols, const int32_t *kinds, int64_t ncols,
                            int64_t r0, int64_t r1, int sep, char *out) {
    char *p = out;
    for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = 0; c < ncols; ++c) {
            if (kinds[c] == 0) {
                p = fmt_int(p, ((const int64_t *)cols[c])[r]);
            } else {
                const double x = ((const double *)cols[c])[r];
                /* an integral value below 1e17 prints its digits under %.17g: no snprintf */
                if (x > -1e17 && x < 1e17 && x == (double)(int64_t)x && (x != 0 || !signbit(x))) {
                    p = fmt_int(p, (int64_t)x);
                    *p++ = '.';
                    *p++ = '0';
                } else
                    p += snprintf(p, 32, "%.17g", x);
            }
            *p++ = c + 1 < ncols ? (char)sep : '\n';
        }
    }
    return (int64_t)(p - out);
}

/* ---------------------------------------------------------------- Dial's bucket queue: the
 * SSSP CPU twin's Dijkstra for integer weights (terrain/graph/sssp.py, _dial_cpu, says how and
 * why in C). label[v] (pre-filled with INT64_MAX: unreached) packs d << shift | p, p the
 * predecessor (all ones in the low shift bits: none; 2**shift - 1 >= n). Buckets: LIFO stacks
 * of DIAL_BLOCK-id blocks in one pool, emptied blocks to a free list. Returns the settled
 * count, -1 when the queue's memory cannot be had, or -3 when *stop was set (checked every
 * 65536 pops). */
#define DIAL_BLOCK 32
#define DIAL_AHEAD_ROW 6
#define DIAL_AHEAD_ARCS 3
#if defined(__GNUC__) || defined(__clang__)
#define DIAL_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define DIAL_PREFETCH(p) ((void)0)
#endif
#define TERRAIN_DIAL_FUNCS(IT, IN, WT, WN)                                                     \
    int64_t terrain_dial_##IN##_##WN(const int64_t *indptr, const IT *indices, const WT *w,   \
                                     int64_t nnz, const int64_t *sources, int64_t n_sources,  \
                                     int64_t *label, int64_t max_weight, int shift,           \
                                     const volatile uint8_t *stop) {                          \
        const int64_t nb = max_weight + 1;                                                     \
        /* blocks in use at once: at most queued / DIAL_BLOCK full ones plus one per bucket */ \
        const int64_t blocks = (nnz + n_sources + 1) / DIAL_BLOCK + nb + 1;                    \
        int64_t *head = malloc((size_t)nb * sizeof *head);                                     \
        int64_t *fill = malloc((size_t)nb * sizeof *fill);                                     \
        int64_t *next = malloc((size_t)blocks * sizeof *next);                                 \
        IT *pool = malloc((size_t)blocks * DIAL_BLOCK * sizeof *pool);                         \
        if (head == NULL || fill == NULL || next == NULL || pool == NULL) {                    \
            free(head); free(fill); free(next); free(pool);                                    \
            return -1;                                                                         \
        }                                                                                      \
        for (int64_t t = 0; t < nb; ++t) {                                                     \
            head[t] = -1;                                                                      \
            fill[t] = 0;                                                                       \
        }                                                                                      \
        int64_t used = 0, free_list = -1, queued = 0, settled = 0, cur = 0, b = 0, popped = 0; \
        const int64_t root = ((int64_t)1 << shift) - 1; /* distance 0, no predecessor */       \
        for (int64_t i = 0; i < n_sources; ++i) {                                              \
            const int64_t s = sources[i];                                                      \
            if (label[s] != root) {                                                            \
                label[s] = root;                                                               \
                DIAL_PUSH(0, (IT)s);                                                           \
            }                                                                                  \
        }                                                                                      \
        while (queued > 0) {                                                                   \
            if ((++popped & 0xFFFF) == 0 && *stop) {                                           \
                settled = -3;                                                                  \
                break;                                                                         \
            }                                                                                  \
            while (head[b] < 0) {                                                              \
                ++cur;                                                                         \
                if (++b == nb) b = 0;                                                          \
            }                                                                                  \
            const int64_t h = head[b], f = fill[b] - 1;                                        \
            const IT *top = pool + h * DIAL_BLOCK;                                             \
            const IT u = top[f];                                                               \
            /* the next pops of this block are known: start their cache misses now */          \
            if (f >= DIAL_AHEAD_ROW) {                                                         \
                const IT x = top[f - DIAL_AHEAD_ROW];                                          \
                DIAL_PREFETCH(&label[x]);                                                      \
                DIAL_PREFETCH(&indptr[x]);                                                     \
            }                                                                                  \
            if (f >= DIAL_AHEAD_ARCS) {                                                        \
                const int64_t e = indptr[top[f - DIAL_AHEAD_ARCS]];                            \
                DIAL_PREFETCH(&indices[e]);                                                    \
                DIAL_PREFETCH(&w[e]);                                                          \
            }                                                                                  \
            if (f == 0) { /* block emptied: to the free list */                                \
                head[b] = next[h];                                                             \
                next[h] = free_list;                                                           \
                free_list = h;                                                                 \
                fill[b] = DIAL_BLOCK;                                                          \
            } else {                                                                           \
                fill[b] = f;                                                                   \
            }                                                                                  \
            --queued;                                                                          \
            if ((label[u] >> shift) != cur) continue; /* stale */                              \
            ++settled;                                                                         \
            const int64_t e1 = indptr[u + 1];                                                  \
            for (int64_t e = indptr[u]; e < e1; ++e) {                                         \
                const IT v = indices[e];                                                       \
                const int64_t wt = (int64_t)w[e], nd = cur + wt;                               \
                const int64_t key = (nd << shift) | (int64_t)u, old = label[v];                \
                if (key < old) {                                                               \
                    label[v] = key;                                                            \
                    if ((old >> shift) != nd) { /* shorter, not only a smaller tail */         \
                        int64_t t = b + wt; /* nd mod nb: b is cur mod nb, wt < nb */          \
                        if (t >= nb) t -= nb;                                                  \
                        DIAL_PUSH(t, v);                                                       \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        free(head); free(fill); free(next); free(pool);                                        \
        return settled;                                                                        \
    }
/* push v on bucket t: a fresh block (from the free list, still in cache, else the pool) when
 * the bucket is empty or its top block full */
#define DIAL_PUSH(t, v)                                                                        \
    do {                                                                                       \
        const int64_t t_ = (t);                                                                \
        int64_t h_ = head[t_];                                                                 \
        if (h_ < 0 || fill[t_] == DIAL_BLOCK) {                                                \
            int64_t nb_ = free_list;                                                           \
            if (nb_ >= 0) free_list = next[nb_];                                               \
            else nb_ = used++;                                                                 \
            next[nb_] = h_;                                                                    \
            head[t_] = nb_;                                                                    \
            fill[t_] = 0;                                                                      \
            h_ = nb_;                                                                          \
        }                                                                                      \
        pool[h_ * DIAL_BLOCK + fill[t_]++] = (v);                                              \
        ++queued;                                                                              \
    } while (0)

TERRAIN_DIAL_FUNCS(int32_t, i32, int32_t, i32)
TERRAIN_DIAL_FUNCS(int32_t, i32, int64_t, i64)
TERRAIN_DIAL_FUNCS(int64_t, i64, int32_t, i32)
TERRAIN_DIAL_FUNCS(int64_t, i64, int64_t, i64)

/* ---------------------------------------------------------------- The SSSP CPU twin's
 * Dijkstra for the weights Dial's queue does not take (floats, large integers;
 * terrain/graph/shortest_paths.py), and the canonical predecessors of final distances for
 * every search (the twins of _frontier.cu's sssp_parents, zero_hop_level and zero_parents;
 * docs/graphs.md, "SSSP"). WT is the summing type (double or int64), inf its "unreached".
 *
 * terrain_sssp_radix: dist pre-filled with inf; a radix heap (Ahuja, Mehlhorn, Orlin &
 * Tarjan) over the keys' bits, which order as the keys do (weights >= 0, no -0.0): Dijkstra
 * pops keys that never decrease, so an entry goes to bucket 0 when its key equals the last
 * popped one, else to bucket 64 - clz(key ^ last); an empty bucket 0 is refilled from the
 * lowest non-empty bucket, whose smallest key becomes the last, its stale entries (a key above
 * the vertex's distance) dropped. Against a 4-ary heap (2-core VM, weights / 7, ms a source):
 * RMAT-18 46-47 against 82, 1000² grid 118-119 against 120-121. Returns the settled count,
 * -1 when the buckets' memory cannot be had, or -3 when *stop was set (checked every 65536
 * pops). */
static inline uint64_t sssp_bits_f64(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}
static inline uint64_t sssp_bits_i64(int64_t x) { return (uint64_t)x; }
/* the radix heap's bucket of bits x = key ^ last: 0 when equal, else 1 + the top set bit */
static inline int sssp_bucket(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return x == 0 ? 0 : 64 - __builtin_clzll(x);
#else
    int b = 0;
    while (x != 0) {
        ++b;
        x >>= 1;
    }
    return b;
#endif
}
#define TERRAIN_SSSP_FUNCS(IT, IN, WT, WN)                                                     \
    int64_t terrain_sssp_radix_##IN##_##WN(const int64_t *indptr, const IT *indices,          \
                                           const WT *w, const int64_t *sources,                \
                                           int64_t n_sources, WT *dist,                        \
                                           const volatile uint8_t *stop) {                     \
        WT *bk[65];                                                                            \
        IT *bv[65];                                                                            \
        int64_t bs[65], bc[65];                                                                \
        for (int b = 0; b < 65; ++b) {                                                         \
            bk[b] = NULL;                                                                      \
            bv[b] = NULL;                                                                      \
            bs[b] = bc[b] = 0;                                                                 \
        }                                                                                      \
        uint64_t last = 0;                                                                     \
        int64_t queued = 0, settled = 0, popped = 0;                                           \
        int failed = 0, stopped = 0;                                                           \
        for (int64_t i = 0; i < n_sources && !failed; ++i) {                                   \
            const int64_t s = sources[i];                                                      \
            if (dist[s] != 0) {                                                                \
                dist[s] = 0;                                                                   \
                SSSP_RADIX_PUSH(WT, IT, WN, 0, s);                                             \
            }                                                                                  \
        }                                                                                      \
        while (queued > 0 && !failed) {                                                        \
            if (bs[0] == 0) {                                                                  \
                int b = 1;                                                                     \
                while (bs[b] == 0) ++b;                                                        \
                WT m = bk[b][0];                                                               \
                for (int64_t j = 1; j < bs[b]; ++j)                                            \
                    if (bk[b][j] < m) m = bk[b][j];                                            \
                last = sssp_bits_##WN(m);                                                      \
                const int64_t count = bs[b];                                                   \
                bs[b] = 0;                                                                     \
                queued -= count;                                                               \
                for (int64_t j = 0; j < count && !failed; ++j) {                               \
                    if (bk[b][j] > dist[bv[b][j]]) continue; /* stale */                       \
                    SSSP_RADIX_PUSH(WT, IT, WN, bk[b][j], bv[b][j]);                           \
                }                                                                              \
                continue;                                                                      \
            }                                                                                  \
            if ((++popped & 0xFFFF) == 0 && *stop) {                                           \
                stopped = 1;                                                                   \
                break;                                                                         \
            }                                                                                  \
            const int64_t top = --bs[0];                                                       \
            --queued;                                                                          \
            const WT k = bk[0][top];                                                           \
            const IT u = bv[0][top];                                                           \
            if (k > dist[u]) continue; /* stale */                                             \
            ++settled;                                                                         \
            const int64_t e1 = indptr[u + 1];                                                  \
            for (int64_t e = indptr[u]; e < e1 && !failed; ++e) {                              \
                const IT v = indices[e];                                                       \
                const WT nd = k + w[e];                                                        \
                if (nd < dist[v]) {                                                            \
                    dist[v] = nd;                                                              \
                    SSSP_RADIX_PUSH(WT, IT, WN, nd, v);                                        \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        for (int b = 0; b < 65; ++b) {                                                         \
            free(bk[b]);                                                                       \
            free(bv[b]);                                                                       \
        }                                                                                      \
        return failed ? -1 : stopped ? -3 : settled;                                           \
    }                                                                                          \
    /* pred[v] = the smallest u with an arc u -> v, dist[u] < dist[v] and dist[u] + w ==       \
     * dist[v] (pred pre-filled with INT64_MAX): each tail's row pushed (any graph) */         \
    void terrain_sssp_parents_##IN##_##WN(const int64_t *indptr, const IT *indices,            \
                                          const WT *w, int64_t n, const WT *dist, WT inf,      \
                                          int64_t *pred) {                                     \
        for (int64_t u = 0; u < n; ++u) {                                                      \
            const WT du = dist[u];                                                             \
            if (du == inf) continue;                                                           \
            for (int64_t e = indptr[u]; e < indptr[u + 1]; ++e) {                              \
                const IT v = indices[e];                                                       \
                if (du < dist[v] && du + w[e] == dist[v] && u < pred[v]) pred[v] = u;          \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    /* the same for vertices [v0, v1) of an undirected graph, pulled from each one's own       \
     * sorted row (its first tight, strictly closer neighbour is the smallest): ranges run     \
     * on threads */                                                                           \
    void terrain_sssp_parents_pull_##IN##_##WN(const int64_t *indptr, const IT *indices,       \
                                               const WT *w, int64_t v0, int64_t v1,            \
                                               const WT *dist, WT inf, int64_t *pred) {        \
        for (int64_t v = v0; v < v1; ++v) {                                                    \
            const WT dv = dist[v];                                                             \
            if (dv == inf) continue;                                                           \
            for (int64_t e = indptr[v]; e < indptr[v + 1]; ++e) {                              \
                const WT du = dist[indices[e]];                                                \
                if (du < dv && du + w[e] == dv) { pred[v] = indices[e]; break; }               \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    /* behind zero-length arcs (dist[u] + w == dist[u] == dist[v]: a zero weight, or one       \
     * absorbed in the sum): hops[v] = level + 1 for the vertices such an arc from level       \
     * `level` reaches (-1: not yet); returns whether any was */                               \
    int terrain_zero_hop_level_##IN##_##WN(const int64_t *indptr, const IT *indices,           \
                                           const WT *w, int64_t n, const WT *dist,             \
                                           int32_t *hops, int32_t level) {                     \
        int changed = 0;                                                                       \
        for (int64_t u = 0; u < n; ++u) {                                                      \
            if (hops[u] != level) continue;                                                    \
            const WT du = dist[u];                                                             \
            for (int64_t e = indptr[u]; e < indptr[u + 1]; ++e) {                              \
                const IT v = indices[e];                                                       \
                if (dist[v] == du && du + w[e] == du && hops[v] < 0) {                         \
                    hops[v] = level + 1;                                                       \
                    changed = 1;                                                               \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        return changed;                                                                        \
    }                                                                                          \
    /* pred[v] = the smallest zero-length tail one hop level closer */                         \
    void terrain_zero_parents_##IN##_##WN(const int64_t *indptr, const IT *indices,            \
                                          const WT *w, int64_t n, const WT *dist,              \
                                          const int32_t *hops, int64_t *pred) {                \
        for (int64_t u = 0; u < n; ++u) {                                                      \
            const int32_t h = hops[u];                                                         \
            if (h < 0) continue;                                                               \
            const WT du = dist[u];                                                             \
            for (int64_t e = indptr[u]; e < indptr[u + 1]; ++e) {                              \
                const IT v = indices[e];                                                       \
                if (dist[v] == du && du + w[e] == du && hops[v] == h + 1 && u < pred[v])       \
                    pred[v] = u;                                                               \
            }                                                                                  \
        }                                                                                      \
    }
/* append (k, v) to its bucket (types WT, IT; bits by sssp_bits_WN), doubling the bucket's
 * arrays when full; `failed` set when they cannot grow */
#define SSSP_RADIX_PUSH(WT, IT, WN, k, v)                                                      \
    do {                                                                                       \
        const WT key_ = (WT)(k);                                                               \
        const int b_ = sssp_bucket(sssp_bits_##WN(key_) ^ last);                               \
        if (bs[b_] == bc[b_]) {                                                                \
            const int64_t grown_ = bc[b_] ? 2 * bc[b_] : 64;                                   \
            WT *nk_ = realloc(bk[b_], (size_t)grown_ * sizeof *nk_);                           \
            if (nk_ != NULL) bk[b_] = nk_;                                                     \
            IT *nv_ = nk_ != NULL ? realloc(bv[b_], (size_t)grown_ * sizeof *nv_) : NULL;      \
            if (nv_ == NULL) {                                                                 \
                failed = 1;                                                                    \
                break;                                                                         \
            }                                                                                  \
            bv[b_] = nv_;                                                                      \
            bc[b_] = grown_;                                                                   \
        }                                                                                      \
        bk[b_][bs[b_]] = key_;                                                                 \
        bv[b_][bs[b_]] = (IT)(v);                                                              \
        ++bs[b_];                                                                              \
        ++queued;                                                                              \
    } while (0)

TERRAIN_SSSP_FUNCS(int32_t, i32, double, f64)
TERRAIN_SSSP_FUNCS(int32_t, i32, int64_t, i64)
TERRAIN_SSSP_FUNCS(int64_t, i64, double, f64)
TERRAIN_SSSP_FUNCS(int64_t, i64, int64_t, i64)

/* Unpack terrain_dial_*'s labels: dist[i] (inf where unreached) and, when pred is not NULL,
 * pred[i] (-1 at sources and unreached vertices). */
void terrain_dial_labels(const int64_t *label, int64_t n, int shift, int64_t *dist,
                         int64_t *pred, int64_t inf) {
    const int64_t none = ((int64_t)1 << shift) - 1, unreached = INT64_MAX >> shift;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t x = label[i], d = x >> shift, p = x & none;
        dist[i] = d == unreached ? inf : d;
        if (pred != NULL) pred[i] = p == none ? -1 : p;
    }
}

/* METIS adjacency lines: the n vertex lines from buf[start] (loaders._parse_metis_chunk says
 * the rules: skip_before tokens open each line; with edge_weights every neighbour is followed by
 * an integer weight; neighbours 1..n). result[0..3] = (entries, error, line start, lines read). */
#define G_ERR_RANGE 6
#define G_ERR_LINES 7
void terrain_metis_parse(const uint8_t *buf, int64_t end, int64_t start, int64_t n,
                         int64_t skip_before, int edge_weights, int64_t *out_u, int64_t *out_v,
                         int64_t *out_w, int64_t cap, int64_t *result) {
    int64_t i = start, k = 0, line = 0, ls = 0;
    int err = G_ERR_NONE;
    while (i < end && line < n && err == G_ERR_NONE) {
        ls = i;
        while (i < end && g_blank(buf[i])) ++i;
        if (i < end && buf[i] == '%') {
            while (i < end && buf[i] != G_LF) ++i;
            ++i;
            continue;
        }
        int64_t tok = 0;
        for (;;) {
            while (i < end && (g_blank(buf[i]) || buf[i] == G_CR)) ++i;
            if (i >= end || buf[i] == G_LF) break;
            int neg = 0, dot = 0;
            if (buf[i] == '-') {
                neg = 1;
                ++i;
            }
            uint64_t val = 0;
            int64_t nd = 0;
            while (i < end && ((buf[i] >= '0' && buf[i] <= '9') || buf[i] == '.')) {
                if (buf[i] == '.') dot = 1;
                else {
                    val = val * 10u + (unsigned int)(buf[i] - '0');
                    ++nd;
                }
                ++i;
            }
            if (nd == 0 || (i < end && !g_sep(buf[i]))) {
                err = G_ERR_TOKEN;
                break;
            }
            const int is_neighbour = tok >= skip_before
                                     && (!edge_weights || (tok - skip_before) % 2 == 0);
            if (is_neighbour) {
                if (dot || nd > 18) err = G_ERR_TOKEN;
                else if (neg) err = G_ERR_NEG;
                else if ((int64_t)val < 1 || (int64_t)val > n) err = G_ERR_RANGE;
                else if (k >= cap) err = G_ERR_LINES;
                if (err != G_ERR_NONE) break;
                out_u[k] = line;
                out_v[k] = (int64_t)val - 1;
                ++k;
            } else if (edge_weights && tok > skip_before) {
                if (dot || nd > 18) {
                    err = dot ? G_ERR_WEIGHT_INT : G_ERR_WEIGHT_BIG;
                    break;
                }
                out_w[k - 1] = neg ? -(int64_t)val : (int64_t)val;
            }
            ++tok;
        }
        if (err != G_ERR_NONE) break;
        ++i;
        ++line;
    }
    /* anything after the n vertex lines must be blank or a comment */
    while (err == G_ERR_NONE && i < end) {
        ls = i;
        while (i < end && (g_blank(buf[i]) || buf[i] == G_CR)) ++i;
        if (i >= end) break;
        if (buf[i] == '%') {
            while (i < end && buf[i] != G_LF) ++i;
        } else if (buf[i] != G_LF) {
            err = G_ERR_LINES;
            ++line;
            break;
        }
        ++i;
    }
    result[0] = k;
    result[1] = err;
    result[2] = err != G_ERR_NONE ? ls : -1;
    result[3] = line;
}

/* ---------------------------------------------------------------- the in-core grid SSSP on the
 * CPU (terrain/grid/_sssp_cpu.py calls them; the twins of _sssp.cu's kernels): Dijkstra on the
 * NaN-framed flat grid of terrain/grid/_sssp_frame.py with lexicographic (distance, label)
 * keys, on a binary heap or, where every arc costs more than zero, a circular bucket queue.
 * C rather than Numba: a process's first Numba kernel costs 0.8-1.0 s before any work, half
 * the whole run of a 1024^2 cost distance. Arc costs are float64 from float32 inputs, one IEEE
 * operation at a time in the order of terrain/grid/costs.py (no FMA: -ffp-contract=off), with
 * its exp_det, so every backend gives the same bits. */

static const double SSSP_EXP_COEF[14] = {
    1.0, 1.0, 1.0 / 2.0, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0, 1.0 / 5040.0,
    1.0 / 40320.0, 1.0 / 362880.0, 1.0 / 3628800.0, 1.0 / 39916800.0, 1.0 / 479001600.0,
    1.0 / 6227020800.0};

static inline double sssp_exp_det(double x) {
    if (x != x) return x;
    if (x > 709.782712893384) return INFINITY;
    if (x < -745.1332191019411) return 0.0;
    const double k = floor(x * 1.4426950408889634 + 0.5);
    const double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
    double p = SSSP_EXP_COEF[13];
    for (int n = 12; n >= 0; --n) p = p * r + SSSP_EXP_COEF[n];
    return ldexp(p, (int)k);
}

/* Cost of arc k from u to v with friction factor fac (sssp_arc_factor's; unused by absdiff). */
static inline double sssp_arc_cost(float zu, float zv, double fac, int64_t k, int model,
                                   const double *lengths) {
    if (model == 0) return fabs((double)zv - (double)zu);
    const double length = lengths[k];
    if (model == 1) return length * fac;
    const double s = ((double)zv - (double)zu) / length;
    const double e = sssp_exp_det(3.5 * fabs(s + 0.05));
    return ((length * e) / (6000.0 / 3600.0)) * fac;
}

/* The two cells knight arc k (8..15) passes between, as the codes of the arcs from its tail to
 * them (costs.py's KNIGHT_MID): the rook neighbour on its long axis, then the diagonal one. */
static const int64_t SSSP_KNIGHT_MID[8][2] = {{0, 7}, {0, 1}, {2, 1}, {2, 3},
                                              {4, 3}, {4, 5}, {6, 5}, {6, 7}};

/* Whether arc k from vertex u to vertex v = u + offs[k] of the padded flat grid exists, and
 * its friction factor in *fac: (f_u + f_v) * 0.5, or for a knight arc, which exists only when
 * the two cells it passes between are vertices (z, and f when has_f, not NaN: z is read here
 * whatever the model), ((f_u + f_v) + (f_a + f_b)) * 0.25 (GRASS r.cost -k). fu, fv: 1
 * without a friction raster. */
static inline int sssp_arc_factor(const float *z, const float *f, int has_f,
                                  const int64_t *offs, int64_t u, int64_t k, float fu, float fv,
                                  double *fac) {
    if (k < 8) {
        *fac = ((double)fu + (double)fv) * 0.5;
        return 1;
    }
    const int64_t a = u + offs[SSSP_KNIGHT_MID[k - 8][0]], b = u + offs[SSSP_KNIGHT_MID[k - 8][1]];
    if (z[a] != z[a] || z[b] != z[b]) return 0;
    const float fa = has_f ? f[a] : 1.0f, fb = has_f ? f[b] : 1.0f;
    if (fa != fa || fb != fb) return 0;
    *fac = (((double)fu + (double)fv) + ((double)fa + (double)fb)) * 0.25;
    return 1;
}

/* verify_grid_sssp's checks of one window's core cells (terrain/verify.py, whose _COST_WHY
 * names the codes): z, f (has_f), d, b, a: nr x nc cells, the core framed by h cells of halo
 * (the longest arc's reach, so every arc of a core cell, and every cell a knight arc passes
 * between, lies in the window); offs: the 16 arcs' offsets in the window, codes: the nk arcs
 * of the connectivity, lengths and model as the solve's; the sources' cells and start costs.
 * The arcs are recomputed with the solve's own cost and factor (sssp_arc_cost,
 * sssp_arc_factor). The first violation in row-major order into out: [code, row, col, arc,
 * the value its sentence gives]; returns its code, or 0. */
int64_t terrain_cert_cost_window(const float *z, const float *f, int has_f, const double *d,
                                 const uint8_t *b, const int32_t *a, int64_t nr, int64_t nc,
                                 int64_t h, int model, const double *lengths,
                                 const int64_t *offs, const int64_t *codes, int64_t nk,
                                 const int64_t *src_r, const int64_t *src_c,
                                 const double *start, int64_t nsrc, double limit, double rtol,
                                 int64_t r0, int64_t c0, double *out) {
    for (int64_t i = h; i < nr - h; ++i)
        for (int64_t j = h; j < nc - h; ++j) {
            const int64_t v = i * nc + j;
            const float zv = z[v], fv = has_f ? f[v] : 1.0f;
            const double dv = d[v];
            const int bv = b[v];
            const int32_t av = a[v];
            const int valid = zv == zv && fv == fv, reached = dv == dv;
            int code = 0;
            double x = 0.0, fac;
            if (!valid) {
                if (reached || bv != 255 || av != -1) code = 1;
            } else if (!reached) {
                if (bv != 255 || av != -1) code = 2;
            } else if (bv == 255 || av < 0 || av >= nsrc) {
                code = 3;
            } else if (bv == 0) {
                if (src_r[av] != r0 + i - h || src_c[av] != c0 + j - h || dv != start[av])
                    code = 4;
            } else {
                const int64_t k = bv - 1;
                int allowed = 0;
                for (int64_t q = 0; q < nk; ++q) allowed |= codes[q] == k;
                const int64_t u = v + (allowed ? offs[k] : 0);
                const float zu = z[u], fu = has_f ? f[u] : 1.0f;
                const double du = d[u];
                const int64_t ku = (k & 8) | ((k + 4) & 7); /* the arc u -> v */
                if (!allowed || !(zu == zu && fu == fu && du == du) ||
                    !sssp_arc_factor(z, f, has_f, offs, u, ku, fu, fv, &fac)) {
                    code = 5; /* not an arc, from a cell that is no vertex, or a knight arc
                                 passing between nodata cells */
                } else {
                    x = du + sssp_arc_cost(zu, zv, fac, ku, model, lengths);
                    if (!(fabs(dv - x) <= rtol * fmax(1.0, fabs(x)))) {
                        code = 6;
                    } else if (a[u] != av) {
                        code = 7;
                        x = a[u];
                    }
                }
            }
            if (code != 0) {
                out[0] = code;
                out[1] = (double)(r0 + i - h);
                out[2] = (double)(c0 + j - h);
                out[3] = 0;
                out[4] = x;
                return code;
            }
            if (!(valid && reached)) continue;
            for (int64_t q = 0; q < nk; ++q) { /* every arc out: d(t) <= d(v) + w(v, t) */
                const int64_t k = codes[q], t = v + offs[k];
                const float zt = z[t], ft = has_f ? f[t] : 1.0f;
                if (!(zt == zt && ft == ft) || !sssp_arc_factor(z, f, has_f, offs, v, k, fv, ft, &fac))
                    continue;
                const double w = sssp_arc_cost(zv, zt, fac, k, model, lengths);
                if (!(w < INFINITY)) continue; /* never taken (tobler on a cliff) */
                x = dv + w;
                const double dt = d[t];
                if (dt != dt ? x <= limit : dt > x + rtol * fmax(1.0, fabs(x))) {
                    out[0] = dt != dt ? 9 : 8;
                    out[1] = (double)(r0 + i - h);
                    out[2] = (double)(c0 + j - h);
                    out[3] = (double)k;
                    out[4] = x;
                    return (int64_t)out[0];
                }
            }
        }
    return 0;
}

static inline int sssp_less(double d1, int64_t l1, double d2, int64_t l2) {
    return d1 < d2 || (d1 == d2 && l1 < l2);
}

/* A cell's label, allocation << hb | hops compared as one integer, is an int64 (hb 32) or,
 * where allocation and hops fit 30 bits, an int32 (_sssp_frame.py's label_layout: 4096^2 with
 * one source, 67 MB instead of 134): lw, the label width in bytes, is 4 or 8. Labels are
 * read into an int64 whatever their width; "none" is the type's largest value, a settled mark
 * -1 - label. The kernels with labels are written once over lw and compiled for each width
 * (SSSP_WIDTHS: a constant lw folds the width's branches away). */
#if defined(__GNUC__) || defined(__clang__)
#define SSSP_GENERIC static inline __attribute__((always_inline))
#else
#define SSSP_GENERIC static inline
#endif
#define SSSP_WIDTHS(CALL) ((lw) == 4 ? CALL(4) : CALL(8))

static inline int64_t sssp_lab(const void *label, int lw, int64_t i) {
    return lw == 4 ? (int64_t)((const int32_t *)label)[i] : ((const int64_t *)label)[i];
}

static inline void sssp_set_lab(void *label, int lw, int64_t i, int64_t v) {
    if (lw == 4)
        ((int32_t *)label)[i] = (int32_t)v;
    else
        ((int64_t *)label)[i] = v;
}

static inline const void *sssp_lab_at(const void *label, int lw, int64_t i) {
    return lw == 4 ? (const void *)((const int32_t *)label + i)
                   : (const void *)((const int64_t *)label + i);
}

/* Padded rows [r0, r1) (the two arguments before the stop flag of every pass over rows, so
 * that callers deal bands to threads; each pass polls *stop each row and returns -3 once it is
 * set, else 0): distance +inf at vertices (z, and f if has_f, not NaN), -inf
 * elsewhere; labels "none" (label NULL: none written, the labels being f's memory). z and f
 * point at the grid's first cell, their rows zs and fs cells apart (an unpadded view of a
 * framed array: the frame's width). zp, fp: z and f copied inside a NaN frame of pad cells,
 * or NULL: no copy (a dummy, or the array is framed already). */
SSSP_GENERIC int64_t sssp_init(const float *z, int64_t zs, const float *f, int64_t fs,
                               int has_f, int64_t rows, int64_t cols, int64_t pad, float *zp,
                               float *fp, double *dist, void *label, int lw, int64_t r0,
                               int64_t r1, const volatile uint8_t *stop) {
    const int64_t width = cols + 2 * pad, none = lw == 4 ? INT32_MAX : INT64_MAX;
    for (int64_t pr = r0; pr < r1; ++pr) {
        if (*stop) return -3;
        const int64_t r = pr - pad;
        for (int64_t pc = 0; pc < width; ++pc) {
            const int64_t c = pc - pad, i = pr * width + pc;
            if (label != NULL) sssp_set_lab(label, lw, i, none);
            if (r >= 0 && r < rows && c >= 0 && c < cols) {
                const float zv = z[r * zs + c];
                if (zp != NULL) zp[i] = zv;
                int ok = zv == zv;
                if (has_f) {
                    const float fv = f[r * fs + c];
                    if (fp != NULL) fp[i] = fv;
                    ok = ok && fv == fv;
                }
                dist[i] = ok ? INFINITY : -INFINITY;
            } else {
                if (zp != NULL) zp[i] = NAN;
                if (fp != NULL) fp[i] = NAN;
                dist[i] = -INFINITY;
            }
        }
    }
    return 0;
}

int64_t terrain_sssp_init(const float *z, int64_t zs, const float *f, int64_t fs, int has_f,
                          int64_t rows, int64_t cols, int64_t pad, float *zp, float *fp,
                          double *dist, void *label, int lw, int64_t r0, int64_t r1,
                          const volatile uint8_t *stop) {
#define SSSP_CALL(W)                                                                           \
    sssp_init(z, zs, f, fs, has_f, rows, cols, pad, zp, fp, dist, label, W, r0, r1, stop)
    return SSSP_WIDTHS(SSSP_CALL);
#undef SSSP_CALL
}

/* Seed cell c at (d0, l0) if it is within max_cost and improves the cell (fixed: equals its
 * final distance with a lower label); whether it did. */
SSSP_GENERIC int sssp_take_seed(int64_t c, double d0, int64_t l0, int fixed, double max_cost,
                                double *dist, void *label, int lw) {
    if (!(d0 > -INFINITY && d0 <= max_cost)) return 0;
    const int64_t lc = sssp_lab(label, lw, c);
    if (fixed ? (d0 != dist[c] || l0 >= lc) : !sssp_less(d0, l0, dist[c], lc)) return 0;
    dist[c] = d0;
    sssp_set_lab(label, lw, c, l0);
    return 1;
}

/* The lexicographic Dijkstra's queue: a radix heap (the graph SSSP's, terrain_sssp_radix) over
 * 128-bit keys, a distance's order bits above a label. Dijkstra pops keys that never
 * decrease (an arc costs >= 0, and one of cost 0 adds a hop to the label), so an entry goes to
 * bucket 0 when its key equals the last popped one, else to 1 + the top bit of key ^ last:
 * 1-64 where only the labels differ, 65-128 where the distances do. An empty bucket 0 is
 * refilled from the lowest non-empty bucket, whose smallest key becomes the last, its stale
 * entries (a cell's distance or label has improved since) dropped. Against the binary heap
 * it replaced (absdiff, 4096² from the centre, 2-core VM): solve 4.7-5.1 s against 8.2-8.7 s;
 * the 40-ft size 92 s against 188 s. */
typedef struct {
    double d;
    int64_t l, c;
} sssp_entry;

typedef struct {
    sssp_entry *e[129];
    int64_t n[129], cap[129], queued;
    uint64_t last_d, last_l;
} sssp_radix;

/* A double's bits as an unsigned integer that orders as the doubles do (-0.0 taken as 0.0). */
static inline uint64_t sssp_order_f64(double x) {
    const uint64_t b = sssp_bits_f64(x + 0.0);
    return (b >> 63) ? ~b : b | ((uint64_t)1 << 63);
}

static inline int sssp_radix_push(sssp_radix *q, double d, int64_t l, int64_t c) {
    const uint64_t xd = sssp_order_f64(d) ^ q->last_d;
    const int b = xd != 0 ? 64 + sssp_bucket(xd) : sssp_bucket((uint64_t)l ^ q->last_l);
    if (q->n[b] == q->cap[b]) {
        const int64_t cap = q->cap[b] ? 2 * q->cap[b] : 256;
        sssp_entry *a = realloc(q->e[b], (size_t)cap * sizeof *a);
        if (a == NULL) return -3;
        q->e[b] = a;
        q->cap[b] = cap;
    }
    q->e[b][q->n[b]++] = (sssp_entry){d, l, c};
    ++q->queued;
    return 0;
}

/* What the relaxations of padded cell un read, asked for ahead of time: its rows of dist and
 * f (has_f) and of z (not NULL), and its label; row is the padded row width. */
SSSP_GENERIC void sssp_prefetch_cell(const double *dist, const void *label, int lw,
                                      const float *f, int has_f, const float *z, int64_t un,
                                      int64_t row) {
    __builtin_prefetch(&dist[un - row], 0, 3);
    __builtin_prefetch(&dist[un], 0, 3);
    __builtin_prefetch(&dist[un + row], 0, 3);
    __builtin_prefetch(sssp_lab_at(label, lw, un), 0, 3);
    if (has_f) {
        __builtin_prefetch(&f[un - row], 0, 3);
        __builtin_prefetch(&f[un], 0, 3);
        __builtin_prefetch(&f[un + row], 0, 3);
    }
    if (z != NULL) {
        __builtin_prefetch(&z[un - row], 0, 3);
        __builtin_prefetch(&z[un], 0, 3);
        __builtin_prefetch(&z[un + row], 0, 3);
    }
}

/* Whether entry x is still its cell's (distance, label). */
#define SSSP_LIVE(X) ((X).d == dist[(X).c] && (X).l == sssp_lab(label, lw, (X).c))

/* Lexicographic-key Dijkstra on the padded flat grid, in place on dist (+inf at vertices,
 * -inf elsewhere; fixed: final, only tight arcs relaxed) and label. With left > 0 distinct
 * cells flagged in targets: ends once they are settled and every cell as near as the last of
 * them. Returns the cells settled, -1 when *stop was set (checked every 65536 settles), -3
 * out of memory. */
SSSP_GENERIC int64_t sssp_heap_run(const float *z, const float *f, int has_f, int model,
                                   const double *lengths, const int64_t *offs,
                                   const int64_t *codes, int64_t nk, double *dist, void *label,
                                   int lw, const int64_t *seeds, const double *seed_dist,
                                   const int64_t *seed_label, int64_t nseeds, int fixed,
                                   double max_cost, const uint8_t *targets, int64_t left,
                                   const volatile uint8_t *stop) {
    sssp_radix q;
    memset(&q, 0, sizeof q);
    int64_t settled = -3;
    for (int64_t s = 0; s < nseeds; ++s) {
        const int64_t c = seeds[s];
        const double d0 = seed_dist[s];
        const int64_t l0 = seed_label[s];
        if (!sssp_take_seed(c, d0, l0, fixed, max_cost, dist, label, lw)) continue;
        if (sssp_radix_push(&q, d0, l0, c)) goto done;
    }
    settled = 0;
    double bound = INFINITY; /* the last target's distance, once every target is settled */
    const int64_t row = offs[2] - offs[0] + 1; /* the padded row width */
    while (q.queued > 0) {
        if (q.n[0] == 0) { /* refill bucket 0 from the lowest non-empty bucket */
            int b = 1;
            while (q.n[b] == 0) ++b;
            sssp_entry *e = q.e[b];
            const int64_t count = q.n[b];
            q.n[b] = 0;
            q.queued -= count;
            int64_t m = 0; /* the least key, stale or not: no live key is below it */
            for (int64_t j = 1; j < count; ++j)
                if (sssp_less(e[j].d, e[j].l, e[m].d, e[m].l)) m = j;
            q.last_d = sssp_order_f64(e[m].d);
            q.last_l = (uint64_t)e[m].l;
            for (int64_t j = 0; j < count; ++j) { /* each into a bucket below b */
                if (j + 16 < count) { /* the cells' state ahead of time: random reads */
                    __builtin_prefetch(&dist[e[j + 16].c], 0, 3);
                    __builtin_prefetch(sssp_lab_at(label, lw, e[j + 16].c), 0, 3);
                }
                if (SSSP_LIVE(e[j]) && sssp_radix_push(&q, e[j].d, e[j].l, e[j].c)) {
                    settled = -3;
                    goto done;
                }
            }
            continue;
        }
        const sssp_entry x = q.e[0][--q.n[0]];
        --q.queued;
        if (q.n[0] > 0) /* the next cell's neighbourhood, ahead of time */
            sssp_prefetch_cell(dist, label, lw, f, has_f, z, q.e[0][q.n[0] - 1].c, row);
        const double d = x.d;
        const int64_t lab = x.l, u = x.c;
        if (d > bound) break;
        if (!SSSP_LIVE(x)) continue; /* stale entry */
        ++settled;
        if ((settled & 0xFFFF) == 0 && *stop) { settled = -1; goto done; }
        if (left > 0 && targets[u] && --left == 0) bound = d;
        const float zu = z[u], fu = has_f ? f[u] : 1.0f;
        const int64_t nlab = lab + 1;
        for (int64_t j = 0; j < nk; ++j) {
            const int64_t k = codes[j], v = u + offs[k];
            const double dv = dist[v];
            if (model == 2 && dv < d) continue; /* settled (or not a vertex): spare the exp */
            double fac;
            if (!sssp_arc_factor(z, f, has_f, offs, u, k, fu, has_f ? f[v] : 1.0f, &fac))
                continue;
            const double nd = d + sssp_arc_cost(zu, z[v], fac, k, model, lengths);
            const int64_t lv = sssp_lab(label, lw, v);
            if (fixed) {
                if (nd != dv || nlab >= lv) continue;
            } else if (nd > max_cost || !sssp_less(nd, nlab, dv, lv)) {
                continue;
            }
            dist[v] = nd;
            sssp_set_lab(label, lw, v, nlab);
            if (sssp_radix_push(&q, nd, nlab, v)) { settled = -3; goto done; }
        }
    }
done:
    for (int b = 0; b < 129; ++b) free(q.e[b]);
    return settled;
}
#undef SSSP_LIVE

/* label: int32 or int64 (lw 4 or 8: the labels' width, as every kernel with labels takes) */
int64_t terrain_sssp_heap(const float *z, const float *f, int has_f, int model,
                          const double *lengths, const int64_t *offs, const int64_t *codes,
                          int64_t nk, double *dist, void *label, int lw, const int64_t *seeds,
                          const double *seed_dist, const int64_t *seed_label, int64_t nseeds,
                          int fixed, double max_cost, const uint8_t *targets, int64_t left,
                          const volatile uint8_t *stop) {
#define SSSP_CALL(W)                                                                           \
    sssp_heap_run(z, f, has_f, model, lengths, offs, codes, nk, dist, label, W, seeds,          \
                  seed_dist, seed_label, nseeds, fixed, max_cost, targets, left, stop)
    return SSSP_WIDTHS(SSSP_CALL);
#undef SSSP_CALL
}

/* A seed of the bucket queue: its cell, start distance and label. */
typedef struct {
    int64_t c;
    double d;
    int64_t l;
} sssp_seed;

/* Seeds ordered by cell, then (distance, label): each cell's first is the least. */
static int sssp_seed_order(const void *a, const void *b) {
    const sssp_seed *x = a, *y = b;
    if (x->c != y->c) return x->c < y->c ? -1 : 1;
    if (x->d != y->d) return x->d < y->d ? -1 : 1;
    return (x->l > y->l) - (x->l < y->l);
}

/* The label this run has given cell v (backlink[v] not 255): a seed's (backlink 0; won: the
 * seeds taken, ordered by cell), else its predecessor's plus a hop, the predecessor being
 * settled (its label holds the mark -1 - label). */
SSSP_GENERIC int64_t sssp_given_label(const void *label, int lw, const uint8_t *backlink,
                                      const int64_t *offs, const sssp_seed *won, int64_t nwon,
                                      int64_t v) {
    const int b = backlink[v];
    if (b != 0) return -sssp_lab(label, lw, v + offs[b - 1]);
    int64_t lo = 0, hi = nwon - 1;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (won[mid].c < v) lo = mid + 1;
        else hi = mid;
    }
    return won[lo].l;
}

/* Dijkstra with a circular array of nbuckets buckets (Dinitz), exact when every arc costs at
 * least 2 / inv_width (no cell of the current bucket can improve another of it); the
 * backlinks in the same pass (every tight predecessor is settled first: the lowest arc code
 * among the relaxations that set or tie a cell's final label). A cell's label is written
 * once, as it is settled (label = -1 - label; the marks stay, except with fixed): until
 * then the label this run gives it follows from its backlink (sssp_given_label), and one it
 * has not been given is its label at the start, or "none" with label_in_f. label_in_f: the
 * labels are f's memory (f read at a cell only until it is settled, which holds without
 * knight arcs, whose middle cells' f may be read later; the labels at the start unread), so
 * that friction and labels take one grid. Under friction z is read only at the cells knight
 * arcs pass between (a 1-cell dummy does without knight arcs). targets, left, stop and the
 * return value as terrain_sssp_heap's; it ends after the bucket of the last target. */
SSSP_GENERIC int64_t sssp_buckets_run(const float *z, const float *f, int has_f, int model,
                                      const double *lengths, const int64_t *offs,
                                      const int64_t *codes, int64_t nk, double *dist,
                                      void *label, int lw, int label_in_f, int64_t ncells,
                                      const int64_t *seeds, const double *seed_dist,
                                      const int64_t *seed_label, int64_t nseeds, int fixed,
                                      double max_cost, double inv_width, int64_t nbuckets,
                                      uint8_t *backlink, const uint8_t *targets, int64_t left,
                                      const volatile uint8_t *stop) {
    const int64_t mask = nbuckets - 1, none = lw == 4 ? INT32_MAX : INT64_MAX;
    int32_t *heads = malloc((size_t)nbuckets * sizeof *heads);
    int64_t cap = 1 << 16, used = 0, live = 0, settled = -3, nwon = 0;
    int32_t *pcell = malloc((size_t)cap * sizeof *pcell);
    int32_t *pnext = malloc((size_t)cap * sizeof *pnext);
    sssp_seed *won = malloc((size_t)(nseeds > 0 ? nseeds : 1) * sizeof *won);
    int32_t freed = -1;
    int64_t cur = (int64_t)1 << 62;
    int64_t offj[16];
    uint8_t backj[16];
    if (heads == NULL || pcell == NULL || pnext == NULL || won == NULL) goto done;
    for (int64_t i = 0; i < nbuckets; ++i) heads[i] = -1;
    memset(backlink, 255, (size_t)ncells); /* no cell given a label yet */
/* The label cell V has now: given by this run, or its label at the start. */
#define SSSP_LABEL_NOW(V)                                                                      \
    (backlink[V] != 255 ? sssp_given_label(label, lw, backlink, offs, won, nwon, V)            \
                        : label_in_f ? none : sssp_lab(label, lw, V))
/* Enqueue CELL in bucket B: an entry from the free list, else a new one (the pools doubled when
 * full). */
#define SSSP_ENQUEUE(CELL, B)                                                                  \
    {                                                                                          \
        int32_t e_;                                                                            \
        if (freed >= 0) {                                                                      \
            e_ = freed;                                                                        \
            freed = pnext[e_];                                                                 \
        } else {                                                                               \
            if (used == cap) {                                                                 \
                int32_t *a = realloc(pcell, (size_t)(2 * cap) * sizeof *a);                    \
                if (a == NULL) { settled = -3; goto done; }                                    \
                pcell = a;                                                                     \
                a = realloc(pnext, (size_t)(2 * cap) * sizeof *a);                             \
                if (a == NULL) { settled = -3; goto done; }                                    \
                pnext = a;                                                                     \
                cap *= 2;                                                                      \
            }                                                                                  \
            e_ = (int32_t)used++;                                                              \
        }                                                                                      \
        pcell[e_] = (int32_t)(CELL);                                                           \
        pnext[e_] = heads[(B) & mask];                                                         \
        heads[(B) & mask] = e_;                                                                \
        ++live;                                                                                \
    }
    /* each cell's least seed (within max_cost; with fixed, at its final distance) is taken
     * where it improves the cell, as taking the seeds one by one would leave it */
    int64_t nvalid = 0;
    for (int64_t s = 0; s < nseeds; ++s) {
        const int64_t c = seeds[s];
        const double d0 = seed_dist[s];
        if (!(d0 > -INFINITY && d0 <= max_cost) || (fixed && d0 != dist[c])) continue;
        won[nvalid++] = (sssp_seed){c, d0, seed_label[s]};
    }
    qsort(won, (size_t)nvalid, sizeof *won, sssp_seed_order);
    for (int64_t s = 0; s < nvalid; ++s) {
        if (s > 0 && won[s].c == won[s - 1].c) continue;
        const sssp_seed x = won[s];
        const int64_t lc = label_in_f ? none : sssp_lab(label, lw, x.c);
        if (fixed ? x.l >= lc : !sssp_less(x.d, x.l, dist[x.c], lc)) continue;
        won[nwon++] = x;
        dist[x.c] = x.d;
        backlink[x.c] = 0;
        const int64_t b = (int64_t)(x.d * inv_width);
        if (b < cur) cur = b;
        SSSP_ENQUEUE(x.c, b)
    }
    /* per arc j: the neighbour offset, and the backlink code of the reverse arc (v -> u) + 1 */
    for (int64_t j = 0; j < nk; ++j) {
        const int64_t k = codes[j];
        offj[j] = offs[k];
        backj[j] = (uint8_t)(((k & 8) | ((k + 4) & 7)) + 1);
    }
    const int64_t row = offs[2] - offs[0] + 1; /* the padded row width */
    settled = 0;
    int64_t last = (int64_t)1 << 62; /* the bucket of the last target, once all are settled */
    while (live > 0) {
        const int64_t slot = cur & mask;
        const int32_t e = heads[slot];
        if (e < 0) {
            if (++cur > last) break;
            continue;
        }
        const int32_t en = pnext[e];
        heads[slot] = en;
        const int64_t u = pcell[e];
        if (en >= 0) { /* the next cell's neighbourhood and the entry after it, ahead of time */
            sssp_prefetch_cell(dist, label, lw, f, has_f, model != 1 ? z : NULL, pcell[en], row);
            const int32_t en2 = pnext[en];
            if (en2 >= 0) {
                __builtin_prefetch(&pcell[en2], 0, 3);
                __builtin_prefetch(&pnext[en2], 0, 3);
            }
        }
        pnext[e] = freed;
        freed = e;
        --live;
        const double d = dist[u];
        /* settled (a mark), or stale; with label_in_f an unsettled cell's label is its
         * friction, whose bits are positive (the queue runs only where every friction is) */
        if (sssp_lab(label, lw, u) < 0 || (int64_t)(d * inv_width) != cur) continue;
        const int64_t lab = sssp_given_label(label, lw, backlink, offs, won, nwon, u);
        const float zu = model != 1 ? z[u] : 1.0f, fu = has_f ? f[u] : 1.0f;
        sssp_set_lab(label, lw, u, -1 - lab); /* settled mark, after f[u]'s last read */
        ++settled;
        if ((settled & 0xFFFF) == 0 && *stop) { settled = -1; goto done; }
        if (left > 0 && targets[u] && --left == 0) last = cur;
        const int64_t nlab = lab + 1;
        for (int64_t j = 0; j < nk; ++j) {
            const int64_t v = u + offj[j];
            const double dv = dist[v];
            if (dv <= d) continue; /* settled, or not a vertex (-inf): every arc costs > 0 */
            /* settled in u's bucket, above d: no arc from u improves it (every arc costs the
               bucket's width or more), and with label_in_f its f is its label now, whose bits
               read as a float are NaN or, above 2^23, a finite negative number */
            if (sssp_lab(label, lw, v) < 0) continue;
            double fac;
            if (!sssp_arc_factor(z, f, has_f, offs, u, codes[j], fu, has_f ? f[v] : 1.0f, &fac))
                continue;
            const double nd = d + sssp_arc_cost(zu, model != 1 ? z[v] : 1.0f, fac, codes[j],
                                                model, lengths);
            if (!(nd <= max_cost && nd <= dv) || (fixed && nd != dv)) continue;
            if (nd == dv) {
                const int64_t lv = SSSP_LABEL_NOW(v);
                if (nlab > lv) continue;
                if (nlab == lv) { /* another tight predecessor with the same label */
                    if (backj[j] < backlink[v]) backlink[v] = backj[j];
                    continue;
                }
            }
            dist[v] = nd;
            backlink[v] = backj[j];
            const int64_t b = (int64_t)(nd * inv_width);
            SSSP_ENQUEUE(v, b)
        }
    }
#undef SSSP_ENQUEUE
#undef SSSP_LABEL_NOW
    if (fixed) /* settled marks off */
        for (int64_t i = 0; i < ncells; ++i) {
            const int64_t l = sssp_lab(label, lw, i);
            if (l < 0) sssp_set_lab(label, lw, i, -1 - l);
        }
done:
    free(heads);
    free(pcell);
    free(pnext);
    free(won);
    return settled;
}

int64_t terrain_sssp_buckets(const float *z, const float *f, int has_f, int model,
                             const double *lengths, const int64_t *offs, const int64_t *codes,
                             int64_t nk, double *dist, void *label, int lw, int label_in_f,
                             int64_t ncells, const int64_t *seeds, const double *seed_dist,
                             const int64_t *seed_label, int64_t nseeds, int fixed,
                             double max_cost, double inv_width, int64_t nbuckets,
                             uint8_t *backlink, const uint8_t *targets, int64_t left,
                             const volatile uint8_t *stop) {
#define SSSP_CALL(W)                                                                           \
    sssp_buckets_run(z, f, has_f, model, lengths, offs, codes, nk, dist, label, W, label_in_f,  \
                     ncells, seeds, seed_dist, seed_label, nseeds, fixed, max_cost, inv_width,  \
                     nbuckets, backlink, targets, left, stop)
    return SSSP_WIDTHS(SSSP_CALL);
#undef SSSP_CALL
}

/* One cell's outputs (its distance into *d, hops when not NULL) from its distance and label
 * (hb bits of hops), or the unreached marks when the distance is not finite; whether the cell
 * was reached. */
static inline int sssp_put_cell(int64_t i, double *d, double dv, int64_t lv, int hb,
                                int32_t *allocation, int32_t *hops, uint8_t *backlink) {
    if (!(dv > -INFINITY && dv < INFINITY)) {
        backlink[i] = 255;
        *d = NAN;
        allocation[i] = -1;
        if (hops != NULL) hops[i] = -1;
        return 0;
    }
    *d = dv;
    allocation[i] = (int32_t)(lv >> hb);
    if (hops != NULL) hops[i] = (int32_t)(lv & (((int64_t)1 << hb) - 1));
    return 1;
}

/* Rows [r0, r1) of the unpadded grid: each cell's backlink (the lowest arc code from a
 * neighbour with the label one hop less over a tight arc; 0 at a source, 255 where
 * unreached), distance (NaN where unreached), allocation and hops (-1 where unreached; hops
 * NULL: none), from the heap's padded state (labels of lw bytes, hb bits of hops). The
 * outputs lie in a frame of opad cells (0: unpadded; pad: the state's own frame, where
 * sssp_outputs then puts the rest in place); distance and allocation NULL: the backlinks
 * alone. */
SSSP_GENERIC int64_t sssp_backlinks(const float *z, const float *f, int has_f, int model,
                                    const double *lengths, const int64_t *offs,
                                    const int64_t *codes, int64_t nk, const double *dist,
                                    const void *label, int lw, int hb, int64_t cols,
                                    int64_t pad, int64_t opad, uint8_t *backlink,
                                    double *distance, int32_t *allocation, int32_t *hops,
                                    int64_t r0, int64_t r1, const volatile uint8_t *stop) {
    const int64_t width = cols + 2 * pad, owidth = cols + 2 * opad,
                  hmask = ((int64_t)1 << hb) - 1;
    for (int64_t r = r0; r < r1; ++r) {
        if (*stop) return -3;
        const int64_t base = (r + pad) * width + pad, obase = (r + opad) * owidth + opad;
        for (int64_t c = 0; c < cols; ++c) {
            const int64_t v = base + c, i = obase + c, lv = sssp_lab(label, lw, v);
            const double dv = dist[v];
            if (distance != NULL) {
                if (!sssp_put_cell(i, distance + i, dv, lv, hb, allocation, hops, backlink))
                    continue;
            } else if (!(dv > -INFINITY && dv < INFINITY)) {
                backlink[i] = 255;
                continue;
            }
            if ((lv & hmask) == 0) {
                backlink[i] = 0;
                continue;
            }
            const int64_t want = lv - 1;
            int code = 255;
            const float zv = z[v], fv = has_f ? f[v] : 1.0f;
            for (int64_t j = 0; j < nk; ++j) { /* codes are increasing */
                const int64_t k = codes[j], u = v + offs[k];
                if (sssp_lab(label, lw, u) != want) continue;
                const int64_t ku = (k & 8) | ((k + 4) & 7); /* the reverse arc u -> v */
                double fac;
                if (!sssp_arc_factor(z, f, has_f, offs, u, ku, has_f ? f[u] : 1.0f, fv, &fac))
                    continue;
                if (dist[u] + sssp_arc_cost(z[u], zv, fac, ku, model, lengths) == dv) {
                    code = (int)k + 1;
                    break;
                }
            }
            backlink[i] = (uint8_t)code;
        }
    }
    return 0;
}

int64_t terrain_sssp_backlinks(const float *z, const float *f, int has_f, int model,
                               const double *lengths, const int64_t *offs, const int64_t *codes,
                               int64_t nk, const double *dist, const void *label, int lw,
                               int hb, int64_t cols, int64_t pad, int64_t opad,
                               uint8_t *backlink, double *distance, int32_t *allocation,
                               int32_t *hops, int64_t r0, int64_t r1,
                               const volatile uint8_t *stop) {
#define SSSP_CALL(W)                                                                           \
    sssp_backlinks(z, f, has_f, model, lengths, offs, codes, nk, dist, label, W, hb, cols, pad, \
                   opad, backlink, distance, allocation, hops, r0, r1, stop)
    return SSSP_WIDTHS(SSSP_CALL);
#undef SSSP_CALL
}

/* Rows [r0, r1) of the outputs from a queue's padded state (labels of lw bytes, with settled
 * marks after the bucket queue; hb bits of hops; the backlinks its pass or sssp_backlinks
 * set), in place at each cell's padded index, so that the results are unpadded views (no
 * second grid of any): the distance in dist (NaN where unreached), 255 in backlink where
 * unreached, allocation and hops (NULL: none) in int32 arrays of the padded size; allocation
 * may be the labels themselves when they are int32 (a cell's label is read before its
 * allocation is written over it). */
SSSP_GENERIC int64_t sssp_outputs(double *dist, const void *label, int lw, int hb,
                                  uint8_t *backlink, int32_t *allocation, int32_t *hops,
                                  int64_t cols, int64_t pad, int64_t r0, int64_t r1,
                                  const volatile uint8_t *stop) {
    const int64_t width = cols + 2 * pad;
    for (int64_t r = r0; r < r1; ++r) {
        if (*stop) return -3;
        const int64_t base = (r + pad) * width + pad;
        for (int64_t c = 0; c < cols; ++c) {
            const int64_t v = base + c;
            int64_t lv = sssp_lab(label, lw, v);
            if (lv < 0) lv = -1 - lv; /* a settled mark */
            sssp_put_cell(v, dist + v, dist[v], lv, hb, allocation, hops, backlink);
        }
    }
    return 0;
}

int64_t terrain_sssp_outputs(double *dist, const void *label, int lw, int hb, uint8_t *backlink,
                             int32_t *allocation, int32_t *hops, int64_t cols, int64_t pad,
                             int64_t r0, int64_t r1, const volatile uint8_t *stop) {
#define SSSP_CALL(W)                                                                           \
    sssp_outputs(dist, label, W, hb, backlink, allocation, hops, cols, pad, r0, r1, stop)
    return SSSP_WIDTHS(SSSP_CALL);
#undef SSSP_CALL
}

/* The largest |z_v - z_u| / L_k over the arcs between vertices whose tail is in rows
 * [r0, r1) of the padded flat grid; -1 once *stop is set (polled each row). */
double terrain_sssp_max_slope(const float *zp, const int64_t *offs, const int64_t *codes,
                              int64_t nk, const double *lengths, int64_t cols, int64_t pad,
                              int64_t r0, int64_t r1, const volatile uint8_t *stop) {
    const int64_t width = cols + 2 * pad;
    double m = 0.0;
    for (int64_t r = r0; r < r1; ++r) {
        if (*stop) return -1.0;
        const int64_t base = (r + pad) * width + pad;
        for (int64_t c = 0; c < cols; ++c) {
            const int64_t u = base + c;
            const double zu = (double)zp[u];
            if (zu != zu) continue;
            for (int64_t j = 0; j < nk; ++j) {
                const int64_t k = codes[j];
                const double s = fabs((double)zp[u + offs[k]] - zu) / lengths[k];
                if (s > m) m = s;
            }
        }
    }
    return m;
}

/* ---- Zarr v3 shards: one shard's chunks encoded in a call (terrain/tiles/_shards.py) ----
 *
 * The chunk loop of a shard in C, so that writer threads run it in parallel (ctypes releases
 * the GIL): copy each chunk out of the shard's cells, skip it when every cell is the fill
 * value, compress it with c-blosc's blosc_compress_ctx (a pointer into numcodecs' extension)
 * or leave it raw, then its CRC-32C (Castagnoli, as zarr's crc32c codec). */

typedef int (*shard_compress_fn)(int clevel, int doshuffle, size_t typesize, size_t nbytes,
                                 const void *src, void *dest, size_t destsize,
                                 const char *compressor, size_t blocksize,
                                 int numinternalthreads);

static uint32_t crc32c_table[8][256];
static volatile int crc32c_ready = 0;
static int crc32c_sse42 = 0;

#if defined(__GNUC__) && defined(__x86_64__)
/* The CPU's crc32 instruction (SSE 4.2), 8 bytes a step: several GB/s, as google_crc32c. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t c, const uint8_t *p,
                                                            int64_t n) {
    uint64_t c64 = c;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
    }
    uint32_t c32 = (uint32_t)c64;
    for (; n > 0; --n, ++p) c32 = __builtin_ia32_crc32qi(c32, *p);
    return c32;
}
#endif

/* The slicing-by-8 tables of the reflected polynomial 0x82F63B78, and whether the CPU has
 * the crc32 instruction; once, as the library loads (the values do not depend on who
 * computes them, should a compiler without constructors leave it to the first call). */
#if defined(__GNUC__)
__attribute__((constructor))
#endif
static void crc32c_build(void) {
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    crc32c_sse42 = __builtin_cpu_supports("sse4.2");
#endif
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc32c_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
        for (int t = 1; t < 8; ++t)
            crc32c_table[t][i] = (crc32c_table[t - 1][i] >> 8)
                                 ^ crc32c_table[0][crc32c_table[t - 1][i] & 0xFFu];
    crc32c_ready = 1;
}

/* CRC-32C of n bytes (google_crc32c.value's). */
uint32_t terrain_crc32c(const uint8_t *p, int64_t n) {
    if (!crc32c_ready) crc32c_build();
    uint32_t c = 0xFFFFFFFFu;
#if defined(__GNUC__) && defined(__x86_64__)
    if (crc32c_sse42) return crc32c_hw(c, p, n) ^ 0xFFFFFFFFu;
#endif
    for (; n >= 8; p += 8, n -= 8) {
        const uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
                                 | (uint32_t)p[3] << 24);
        const uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16
                            | (uint32_t)p[7] << 24;
        c = crc32c_table[7][lo & 0xFFu] ^ crc32c_table[6][(lo >> 8) & 0xFFu]
            ^ crc32c_table[5][(lo >> 16) & 0xFFu] ^ crc32c_table[4][lo >> 24]
            ^ crc32c_table[3][hi & 0xFFu] ^ crc32c_table[2][(hi >> 8) & 0xFFu]
            ^ crc32c_table[1][(hi >> 16) & 0xFFu] ^ crc32c_table[0][hi >> 24];
    }
    for (; n > 0; --n, ++p) c = (c >> 8) ^ crc32c_table[0][(c ^ *p) & 0xFFu];
    return c ^ 0xFFFFFFFFu;
}

/* Whether every cell of the chunk is the fill value: as numbers for floats (kind_float:
 * itemsize 4 or 8; NaN fill = every cell NaN, and 0.0 equals -0.0), else byte for byte. */
static int shard_all_fill(const uint8_t *tile, int64_t cells, int64_t itemsize, int kind_float,
                          const uint8_t *fill) {
/* the cells as numbers of type T: a NaN fill matches NaN cells only */
#define SHARD_ALL_FILL(T)                                            \
    do {                                                             \
        T f;                                                         \
        memcpy(&f, fill, sizeof f);                                  \
        const T *t = (const T *)tile;                                \
        int nan = f != f;                                            \
        for (int64_t i = 0; i < cells; ++i)                          \
            if (nan ? t[i] == t[i] : t[i] != f) return 0;            \
        return 1;                                                    \
    } while (0)
    if (kind_float && itemsize == 4) SHARD_ALL_FILL(float);
    if (kind_float && itemsize == 8) SHARD_ALL_FILL(double);
#undef SHARD_ALL_FILL
    for (int64_t i = 0; i < cells; ++i)
        if (memcmp(tile + i * itemsize, fill, (size_t)itemsize) != 0) return 0;
    return 1;
}

/* Encode the chunks order[2*first ..] of one shard into out (cap bytes), in that order: chunk
 * (ci, cj) covers cells [ci*tr, ci*tr + tr) x [cj*tc, cj*tc + tc) of the shard's rows x cols
 * cells, block (row stride ld bytes, itemsize bytes a cell, rows contiguous); cells past the
 * block are fill. A chunk of fill values only is left out; another is copied into tile,
 * compressed by compress (NULL: raw), followed by its CRC-32C with checksum, and its
 * (offset + base, length) written into index[2 * (ci * pc + cj)]. Returns the bytes put in
 * out and sets *next to the first chunk not encoded (nchunks when done: out is full
 * otherwise); -1 when compress failed. out must hold one chunk: tr * tc * itemsize + 16 + 4. */
int64_t terrain_shard_encode(const uint8_t *block, int64_t rows, int64_t cols, int64_t ld,
                             int64_t itemsize, int kind_float, const uint8_t *fill,
                             int64_t tr, int64_t tc, const int64_t *order, int64_t first,
                             int64_t nchunks, int64_t pc, shard_compress_fn compress,
                             int clevel, int shuffle, const char *cname, int64_t blocksize,
                             int checksum, uint8_t *tile, uint8_t *out, int64_t cap,
                             uint64_t base, uint64_t *index, int64_t *next) {
    const int64_t chunk_bytes = tr * tc * itemsize;
    const int64_t worst = chunk_bytes + 16 + 4; /* BLOSC_MAX_OVERHEAD, the CRC */
    int64_t used = 0, k = first;
    for (; k < nchunks; ++k) {
        const int64_t ci = order[2 * k], cj = order[2 * k + 1];
        const int64_t a0 = ci * tr, b0 = cj * tc;
        if (a0 >= rows || b0 >= cols) continue;
        if (cap - used < worst) break;
        const int64_t h = rows - a0 < tr ? rows - a0 : tr, w = cols - b0 < tc ? cols - b0 : tc;
        if (h < tr || w < tc)
            for (int64_t i = 0; i < tr * tc; ++i)
                memcpy(tile + i * itemsize, fill, (size_t)itemsize);
        for (int64_t r = 0; r < h; ++r)
            memcpy(tile + r * tc * itemsize, block + (a0 + r) * ld + b0 * itemsize,
                   (size_t)(w * itemsize));
        if (shard_all_fill(tile, tr * tc, itemsize, kind_float, fill)) continue;
        int64_t n;
        if (compress != NULL) {
            n = compress(clevel, shuffle, (size_t)itemsize, (size_t)chunk_bytes, tile,
                         out + used, (size_t)(cap - used), cname, (size_t)blocksize, 1);
            if (n <= 0) return -1;
        } else {
            memcpy(out + used, tile, (size_t)chunk_bytes);
            n = chunk_bytes;
        }
        if (checksum) {
            const uint32_t c = terrain_crc32c(out + used, n);
            for (int b = 0; b < 4; ++b) out[used + n + b] = (uint8_t)(c >> (8 * b));
            n += 4;
        }
        index[2 * (ci * pc + cj)] = base + (uint64_t)used;
        index[2 * (ci * pc + cj) + 1] = (uint64_t)n;
        used += n;
    }
    *next = k;
    return used;
}
