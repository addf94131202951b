// Parsing the data section of an ASCII grid on the device: the CUDA twin of parse_row in
// _parse.c, per token instead of per row (terrain/io/_parse_gpu.py launches it).
//
// The text (the data section, one '\n' sentinel appended) is on the device. Tokens are the
// maximal runs of non-whitespace bytes (whitespace as strtod skips it: space, \t..\r).
//   count_starts    each thread takes SEG bytes and counts the token starts and the newlines
//                   in them (a token start: non-space byte after a space, or at offset 0).
//   write_starts    after an exclusive scan of both counts (CuPy), each thread writes the
//                   offsets of its token starts and of the bytes after its newlines, in order:
//                   stream compaction in two passes, no flag array of the text's size.
//   parse_tokens    one thread per token: the same digit loop, exactness test and Clinger
//                   fast path as parse_rows (a significand <= 2^53 times or divided by an exact
//                   10^|e|, |e| <= 22: one IEEE double operation, then the round-to-nearest
//                   cast to float32), so every value is bit for bit the CPU's. Tokens the fast
//                   path cannot take get the NaN payload SLOW_BITS (the host finishes them
//                   with a correctly rounded parse, as on the CPU); a token that is not a
//                   number (nor GRASS '*') lowers *first_bad to its index, and the host then
//                   re-parses on the CPU to raise the CPU's error message.
//                   Nodata as on the CPU: an integer token equal to it, another number whose
//                   float32 GDAL's float32 nodata test takes; an integer float32 rounds (beyond
//                   2^24) lowers *first_rounded to its index, for the host's warning.
// The host checks the row structure (ncols tokens per line, nrows lines) from the two offset
// lists before the token index k is taken as cell k.

#define SEG 64

__device__ __forceinline__ bool is_space(unsigned int c) {
    return c == 32u || (c >= 9u && c <= 13u);
}

extern "C" __global__ void count_starts(const unsigned char* __restrict__ buf, long long n,
                                        int* __restrict__ n_starts, int* __restrict__ n_lines) {
    long long seg = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long a = seg * SEG;
    if (a >= n) return;
    long long b = a + SEG < n ? a + SEG : n;
    bool prev_space = a == 0 ? true : is_space(buf[a - 1]);
    int s = 0, l = 0;
    for (long long i = a; i < b; ++i) {
        unsigned int c = buf[i];
        bool sp = is_space(c);
        s += (!sp && prev_space);
        l += (c == 10u);
        prev_space = sp;
    }
    n_starts[seg] = s;
    n_lines[seg] = l;
}

extern "C" __global__ void write_starts(const unsigned char* __restrict__ buf, long long n,
                                        const long long* __restrict__ start_off,
                                        const long long* __restrict__ line_off,
                                        long long* __restrict__ starts,
                                        long long* __restrict__ lines) {
    long long seg = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long a = seg * SEG;
    if (a >= n) return;
    long long b = a + SEG < n ? a + SEG : n;
    bool prev_space = a == 0 ? true : is_space(buf[a - 1]);
    long long s = start_off[seg], l = line_off[seg];
    for (long long i = a; i < b; ++i) {
        unsigned int c = buf[i];
        bool sp = is_space(c);
        if (!sp && prev_space) starts[s++] = i;
        if (c == 10u) lines[l++] = i + 1;
        prev_space = sp;
    }
}

__constant__ double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21,
                                 1e22};

#define MAX_DIGITS 19
#define EXACT 9007199254740992ULL  // 2^53
#define NAN_BITS 0x7FC00000u
#define SLOW_BITS 0x7FC0DEADu

// "nan", "NaN", "-nan", ...: a NaN, which GDAL's ASCII grid reader reads as one
__device__ __forceinline__ bool is_nan_token(const unsigned char* t, long long len) {
    if (len == 4 && (t[0] == 45 || t[0] == 43)) {  // '-' '+'
        ++t;
        --len;
    }
    return len == 3 && (t[0] | 32) == 110 && (t[1] | 32) == 97 && (t[2] | 32) == 110;  // n a n
}

// GDAL's test of a float32 cell against a float32 nodata (ARE_REAL_EQUAL of gdal_priv.h, in
// float arithmetic, rounded as the CPU's: no contraction): equal, or within 2^-22 of their sum
__device__ __forceinline__ bool gdal_nodata_equal(float f, float nodata) {
    return f == nodata ||
           fabsf(__fsub_rn(f, nodata)) <
               __fmul_rn(__fmul_rn(1.1920928955078125e-7f, fabsf(__fadd_rn(f, nodata))), 2.0f);
}

extern "C" __global__ void parse_tokens(const unsigned char* __restrict__ buf,
                                        const long long* __restrict__ starts, long long n_tokens,
                                        float* __restrict__ out, double nodata, int has_nodata,
                                        int star_is_nodata, unsigned long long* n_slow,
                                        long long* first_bad, long long* first_rounded) {
    long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n_tokens) return;
    long long p = starts[k];
    const long long t0 = p;
    const bool neg = buf[p] == 45;  // '-'
    if (neg || buf[p] == 43) ++p;   // '+'
    unsigned long long mant = 0;
    int nd = 0;           // digits folded into mant (leading zeros included)
    long long e10 = 0;    // power of ten of mant's last digit
    bool exact = true;    // every nonzero digit made it into mant
    long long n_digits = 0;
    int point = 0;
    while (true) {  // the whitespace after the token (or the sentinel) stops it
        int d = (int)buf[p] - 48;
        if (d >= 0 && d <= 9) {
            if (nd < MAX_DIGITS) {
                mant = mant * 10ULL + (unsigned long long)d;
                ++nd;
                e10 -= point;
            } else {
                e10 += 1 - point;
                exact &= d == 0;
            }
            ++n_digits;
        } else if (d == -2 && point == 0) {  // '.'
            point = 1;
        } else {
            break;
        }
        ++p;
    }
    bool ok = n_digits > 0;
    bool integral = point == 0;  // no point, no exponent: an Int32 cell for GDAL
    if (ok && (buf[p] == 101 || buf[p] == 69)) {  // 'e' 'E'
        ++p;
        integral = false;
        bool eneg = false;
        if (buf[p] == 45 || buf[p] == 43) {
            eneg = buf[p] == 45;
            ++p;
        }
        long long ex = 0, n_exp = 0;
        while (buf[p] >= 48 && buf[p] <= 57) {
            if (ex < 100000) ex = ex * 10 + (long long)buf[p] - 48;
            ++n_exp;
            ++p;
        }
        ok = n_exp > 0;
        e10 += eneg ? -ex : ex;
    }
    if (!ok || !is_space(buf[p])) {
        while (!is_space(buf[p])) ++p;
        if ((star_is_nodata && p - t0 == 1 && buf[t0] == 42) ||  // GRASS '*'
            is_nan_token(buf + t0, p - t0)) {  // "nan" as GDAL reads it: nodata
            out[k] = __int_as_float((int)NAN_BITS);
            return;
        }
        atomicMin(first_bad, k);
        out[k] = __int_as_float((int)NAN_BITS);
        return;
    }
    double v;
    if (mant == 0 && exact) {  // a nonzero digit past MAX_DIGITS: not zero
        v = neg ? -0.0 : 0.0;
    } else {
        while (mant > EXACT && mant % 10ULL == 0) {  // trailing zeros
            mant /= 10ULL;
            ++e10;
        }
        if (!exact || mant > EXACT || e10 < -22 || e10 > 22) {
            out[k] = __int_as_float((int)SLOW_BITS);
            atomicAdd(n_slow, 1ULL);
            return;
        }
        v = (double)mant;
        v = e10 >= 0 ? __dmul_rn(v, POW10[e10]) : __ddiv_rn(v, POW10[-e10]);
        if (neg) v = -v;
    }
    float f = __double2float_rn(v);
    // an integer is nodata when it is the nodata (GDAL reads a grid of integers as Int32),
    // another number when its float32 is GDAL's float32 nodata
    if (has_nodata && (integral ? v == nodata
                                : gdal_nodata_equal(f, __double2float_rn(nodata)))) {
        out[k] = __int_as_float((int)NAN_BITS);
        return;
    }
    if (integral && (double)f != v) atomicMin(first_rounded, k);
    out[k] = f;
}
