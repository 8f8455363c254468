/*
 * The compiled chunk parser: the implementation of eventparse_core.h (read that first).
 *
 * Layout: buffers and columns; the JSON scanner (strings, numbers, values, keys given
 * twice); number and time conversions; an event's fields, its checks, its drop reason
 * and its row; the chunk. Invariants are asserted where they are used; the asserts are
 * on in sanitizer builds (.ci/run builds with ASan/UBSan) and wherever NDEBUG is unset.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* strtod_l, newlocale: glibc declares them under it */
#endif
#if defined(__SANITIZE_ADDRESS__)
#undef NDEBUG
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#undef NDEBUG
#endif
#endif
#include <assert.h>
#include <stdio.h>

#include "eventparse_core.h"

/* ------------------------------------------------------------------ buffers and columns */
/* memcpy for the short copies that dominate here (keys, numbers, names): fixed-size
 * moves the compiler inlines, instead of a library call each */
static inline void copy_small(char *dst, const char *src, size_t n) {
    if (n >= 16) {
        memcpy(dst, src, n);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    } else {
        for (size_t i = 0; i < n; i++) dst[i] = src[i];
    }
}

static inline int buf_reserve(Buf *b, size_t extra) {
    if (extra > SIZE_MAX / 4 - b->len) return -1;
    size_t need = b->len + extra;
    if (need <= b->cap && b->data) return 0; /* after a reserve, data is never NULL */
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *p = (char *)realloc(b->data, cap);
    if (!p) return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

static inline int buf_append(Buf *b, const void *src, size_t n) {
    if (n == 0) return 0; /* b->data may still be NULL: no pointer arithmetic on it */
    if (buf_reserve(b, n)) return -1;
    copy_small(b->data + b->len, (const char *)src, n);
    b->len += n;
    return 0;
}

/* n zero bytes at the end */
static inline int buf_zeros(Buf *b, size_t n) {
    if (n == 0) return 0;
    if (buf_reserve(b, n)) return -1;
    memset(b->data + b->len, 0, n);
    b->len += n;
    return 0;
}

static void buf_free(Buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static int col_init(Col *c, int type) {
    memset(c, 0, sizeof *c);
    c->type = type;
    if (type == COL_STR || type == COL_LIST) {
        int32_t zero = 0;
        return buf_append(&c->values, &zero, 4);
    }
    return 0;
}

static void col_free(Col *c) {
    buf_free(&c->values);
    buf_free(&c->data);
    buf_free(&c->valid);
}

/* NULLs up to (not including) row */
static inline int col_pad(Col *c, size_t row) {
    if (row <= c->rows) return 0;
    size_t missing = row - c->rows;
    size_t bytes = (row + 7) / 8;
    if (c->valid.len < bytes && buf_zeros(&c->valid, bytes - c->valid.len)) return -1;
    if (c->type == COL_I64 || c->type == COL_F64) {
        if (buf_zeros(&c->values, missing * 8)) return -1;
    } else {
        int32_t off;
        memcpy(&off, c->values.data + c->values.len - 4, 4);
        if (buf_reserve(&c->values, missing * 4)) return -1;
        for (size_t i = 0; i < missing; i++) {
            memcpy(c->values.data + c->values.len, &off, 4);
            c->values.len += 4;
        }
    }
    c->nulls += missing;
    c->rows = row;
    return 0;
}

/* marks `row` valid (the value itself was written by the caller) */
static inline int col_mark(Col *c, size_t row) {
    size_t bytes = row / 8 + 1;
    if (c->valid.len < bytes && buf_zeros(&c->valid, bytes - c->valid.len)) return -1;
    ((unsigned char *)c->valid.data)[row / 8] |= (unsigned char)(1u << (row % 8));
    c->rows = row + 1;
    c->touched = 1;
    return 0;
}

static inline int col_i64(Col *c, size_t row, int64_t v) {
    if (col_pad(c, row) || buf_append(&c->values, &v, 8)) return -1;
    return col_mark(c, row);
}

static inline int col_f64(Col *c, size_t row, double v) {
    if (col_pad(c, row) || buf_append(&c->values, &v, 8)) return -1;
    return col_mark(c, row);
}

/* ends a string (or list) row whose bytes (or child values) were appended to c->data */
static inline int col_close_var(Col *c, size_t row) {
    size_t end = c->type == COL_LIST ? c->data.len / 8 : c->data.len;
    if (end > INT32_MAX) return -1;
    int32_t off = (int32_t)end;
    if (buf_append(&c->values, &off, 4)) return -1;
    return col_mark(c, row);
}

static inline int col_str(Col *c, size_t row, const char *s, size_t n) {
    if (col_pad(c, row) || buf_append(&c->data, s, n)) return -1;
    return col_close_var(c, row);
}


static void decline(Parser *P, const char *why) {
    if (P->status == EP_OK) {
        P->status = EP_DECLINE;
        P->why = why;
    }
}

/* A syntax error at `P->p`: at the chunk's last byte (its closing ']') or beyond, the
 * cut fell inside a value; earlier, the text is not JSON (the msgspec path says so). */
static void syntax(Parser *P) {
    if (P->status != EP_OK) return;
    if (P->p >= P->end - 1) {
        P->status = EP_BOUNDARY;
        P->why = "the text ends inside an event";
    } else {
        P->status = EP_DECLINE;
        P->why = "invalid JSON";
    }
}

static void nomem(Parser *P) {
    if (P->status != EP_OK) return; /* a decline (or a cut) said first why */
    P->status = EP_NOMEM;
    P->why = "out of memory";
}

static inline void skip_ws(Parser *P) {
    const char *p = P->p, *e = P->end;
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    P->p = p;
}

static inline int peek(Parser *P) { return P->p < P->end ? (unsigned char)*P->p : -1; }

/* ------------------------------------------------------------------ strings */
static inline int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex4(const char *p, const char *end, unsigned *out) {
    if (end - p < 4) return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval((unsigned char)p[i]);
        if (h < 0) return -2;
        v = v * 16 + (unsigned)h;
    }
    *out = v;
    return 0;
}

/* Length of a valid UTF-8 sequence at p (first byte >= 0x80), 0 if invalid (overlong,
 * surrogate, beyond U+10FFFF), -1 if cut off by the end. */
static int utf8_seq(const unsigned char *p, const unsigned char *e) {
    unsigned c = p[0];
    int n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) { n = 3; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) n = 3;
    else if (c == 0xED) { n = 3; hi = 0x9F; }
    else if (c >= 0xEE && c <= 0xEF) n = 3;
    else if (c == 0xF0) { n = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) { n = 4; hi = 0x8F; }
    else return 0;
    if (e - p < n) {
        /* what is there must still be a valid prefix, else it is invalid, not cut */
        for (int i = 1; i < e - p; i++) {
            unsigned b = p[i];
            if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
        }
        return -1;
    }
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
#define HAS_ZERO(x) (((x) - ONES) & ~(x) & HIGHS)

/* Parses a string at P->p (a '"'): its content into `out`. Checks escapes, UTF-8 and
 * control characters; declines a lone surrogate escape, \u0000 and a string beyond the
 * bound. */
static void parse_string(Parser *P, Span *out) {
    const unsigned char *p = (const unsigned char *)P->p + 1;
    const unsigned char *e = (const unsigned char *)P->end;
    const unsigned char *s = p;
    int esc = 0;
    for (;;) {
        /* eight bytes at a time while none is special: '"', '\\', < 0x20, >= 0x80 */
        while (e - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            uint64_t q = w ^ (ONES * '"');
            uint64_t b = w ^ (ONES * '\\');
            uint64_t ctl = (w - ONES * 0x20) & ~w & HIGHS;
            if (HAS_ZERO(q) | HAS_ZERO(b) | ctl | (w & HIGHS)) break;
            p += 8;
        }
        if (p >= e) {
            P->p = (const char *)p;
            syntax(P);
            return;
        }
        unsigned c = *p;
        if (c == '"') break;
        if (c == '\\') {
            esc = 1;
            if (e - p < 2) {
                P->p = (const char *)e;
                syntax(P);
                return;
            }
            unsigned d = p[1];
            if (d == 'u') {
                unsigned u;
                int r = read_hex4((const char *)p + 2, (const char *)e, &u);
                if (r < 0) {
                    P->p = (const char *)p;
                    syntax(P);
                    return;
                }
                if (u == 0) {
                    P->p = (const char *)p;
                    decline(P, "a \\u0000 escape");
                    return;
                }
                if (u >= 0xD800 && u <= 0xDBFF) {
                    unsigned u2;
                    if (e - p < 12) {
                        /* a pair cut off, or a lone surrogate: the msgspec path tells */
                        P->p = (const char *)p;
                        decline(P, "a surrogate escape at the end of the text");
                        return;
                    }
                    if (p[6] != '\\' || p[7] != 'u' || read_hex4((const char *)p + 8, (const char *)e, &u2) ||
                        u2 < 0xDC00 || u2 > 0xDFFF) {
                        P->p = (const char *)p;
                        decline(P, "a lone surrogate escape");
                        return;
                    }
                    p += 12;
                } else if (u >= 0xDC00 && u <= 0xDFFF) {
                    P->p = (const char *)p;
                    decline(P, "a lone surrogate escape");
                    return;
                } else {
                    p += 6;
                }
            } else if (d == '"' || d == '\\' || d == '/' || d == 'b' || d == 'f' || d == 'n' || d == 'r' ||
                       d == 't') {
                p += 2;
            } else {
                P->p = (const char *)p;
                syntax(P);
                return;
            }
            continue;
        }
        if (c < 0x20) {
            P->p = (const char *)p;
            syntax(P);
            return;
        }
        if (c >= 0x80) {
            int n = utf8_seq(p, e);
            if (n <= 0) {
                P->p = (const char *)p;
                decline(P, "invalid UTF-8");
                return;
            }
            p += n;
            continue;
        }
        p++;
    }
    size_t n = (size_t)(p - s);
    if (n + 2 >= P->max_string) {
        decline(P, "a string near the string bound");
        return;
    }
    out->p = (const char *)s;
    out->n = n;
    out->type = T_STRING;
    out->esc = (uint8_t)esc;
    P->p = (const char *)p + 1;
}

static void put_utf8(unsigned cp, char *o, size_t *k) {
    if (cp < 0x80) {
        o[(*k)++] = (char)cp;
    } else if (cp < 0x800) {
        o[(*k)++] = (char)(0xC0 | (cp >> 6));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        o[(*k)++] = (char)(0xE0 | (cp >> 12));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        o[(*k)++] = (char)(0xF0 | (cp >> 18));
        o[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* The decoded text of a string span (already validated by parse_string) appended to
 * `out`. Decoded text is never longer than its source. */
static int decode_string(const Span *s, Buf *out) {
    if (!s->esc) return buf_append(out, s->p, s->n);
    if (buf_reserve(out, s->n)) return -1;
    char *o = out->data + out->len;
    size_t k = 0;
    const char *p = s->p, *e = s->p + s->n;
    while (p < e) {
        if (*p != '\\') {
            o[k++] = *p++;
            continue;
        }
        char d = p[1];
        unsigned u = 0, u2 = 0;
        switch (d) {
        case 'b': o[k++] = '\b'; p += 2; break;
        case 'f': o[k++] = '\f'; p += 2; break;
        case 'n': o[k++] = '\n'; p += 2; break;
        case 'r': o[k++] = '\r'; p += 2; break;
        case 't': o[k++] = '\t'; p += 2; break;
        case 'u':
            /* parse_string let through only \uXXXX with four hex digits, a high surrogate
             * only with its low one: a failure here is a bug, never text */
            if (read_hex4(p + 2, e, &u)) {
                assert(!"decode_string: an escape parse_string did not check");
                return -1;
            }
            if (u >= 0xD800 && u <= 0xDBFF) {
                if (read_hex4(p + 8, e, &u2) || u2 < 0xDC00 || u2 > 0xDFFF) {
                    assert(!"decode_string: a surrogate pair parse_string did not check");
                    return -1;
                }
                u = 0x10000 + ((u - 0xD800) << 10) + (u2 - 0xDC00);
                p += 12;
            } else {
                p += 6;
            }
            put_utf8(u, o, &k);
            break;
        default: o[k++] = d; p += 2; break; /* " \ / */
        }
    }
    out->len += k;
    return 0;
}

/* ------------------------------------------------------------------ numbers */
static void parse_number(Parser *P, Span *out) {
    const char *p = P->p, *e = P->end, *s = p;
    int is_float = 0;
    if (p < e && *p == '-') p++;
    if (p >= e) goto cut;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < e && *p >= '0' && *p <= '9') p++;
    } else {
        P->p = p;
        syntax(P);
        return;
    }
    if (p < e && *p == '.') {
        is_float = 1;
        p++;
        if (p >= e) goto cut;
        if (!(*p >= '0' && *p <= '9')) {
            P->p = p;
            syntax(P);
            return;
        }
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        is_float = 1;
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e) goto cut;
        if (!(*p >= '0' && *p <= '9')) {
            P->p = p;
            syntax(P);
            return;
        }
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    if (p >= e) goto cut; /* a number cannot end the chunk: its ']' follows */
    if ((size_t)(p - s) > MAX_NUMBER_CHARS) {
        P->p = s;
        decline(P, "a number of more than 100 characters");
        return;
    }
    out->p = s;
    out->n = (size_t)(p - s);
    out->type = is_float ? T_FLOAT : T_INT;
    out->esc = 0;
    P->p = p;
    return;
cut:
    P->p = e;
    syntax(P);
}

/* An integer token (validated, at most MAX_NUMBER_CHARS) to int64; 0 if it does not fit. */
static int int_token(const char *p, size_t n, int64_t *out) {
    int neg = 0;
    size_t i = 0;
    if (i < n && (p[i] == '-' || p[i] == '+')) {
        neg = p[i] == '-';
        i++;
    }
    if (i >= n) return 0;
    uint64_t v = 0;
    const uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; i < n; i++) {
        unsigned d = (unsigned)(p[i] - '0');
        if (d > 9) return 0;
        if (v > (lim - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v; /* two's complement: -2^63 included */
    return 1;
}

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The double a number text stands for, correctly rounded (as Python's float() and
 * msgspec give it): exact in the common case (at most 15 significant digits and a power
 * of ten within 1e22, Clinger's fast path), else the C library's strtod in the C locale
 * (glibc's and macOS's are correctly rounded). */
static double to_double(Parser *P, const char *p, size_t n) {
    uint64_t digits = 0;
    int nd = 0, exp10 = 0, neg = 0;
    size_t i = 0;
    if (i < n && (p[i] == '-' || p[i] == '+')) {
        neg = p[i] == '-';
        i++;
    }
    for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
        if (digits || p[i] != '0') {
            if (nd < 19) digits = digits * 10 + (uint64_t)(p[i] - '0');
            nd++;
        }
    }
    if (i < n && p[i] == '.') {
        for (i++; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
            if (digits || p[i] != '0') {
                if (nd < 19) digits = digits * 10 + (uint64_t)(p[i] - '0');
                nd++;
            }
            exp10--;
        }
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        int eneg = 0, ev = 0;
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-')) {
            eneg = p[i] == '-';
            i++;
        }
        for (; i < n && p[i] >= '0' && p[i] <= '9'; i++)
            if (ev < 100000) ev = ev * 10 + (p[i] - '0');
        exp10 += eneg ? -ev : ev;
    }
    if (nd <= 15 && exp10 >= -22 && exp10 <= 22) {
        double d = (double)digits;
        d = exp10 < 0 ? d / POW10[-exp10] : d * POW10[exp10];
        return neg ? -d : d;
    }
    char tmp[MAX_NUMBER_CHARS + 1];
    if (n > MAX_NUMBER_CHARS) return NAN;
    memcpy(tmp, p, n);
    tmp[n] = 0;
#if defined(_WIN32)
    return _strtod_l(tmp, NULL, P->c_locale);
#else
    return strtod_l(tmp, NULL, P->c_locale);
#endif
}

/* ------------------------------------------------------------------ exact times */
enum { TIME_OK = 0, TIME_BAD = 1, TIME_DECLINE = 2 };

/* Microseconds as written to exact ns: the decimal value times 1000, rounded half to
 * even to an integer that fits in int64 (events.time_ns). TIME_BAD: out of range;
 * TIME_DECLINE: more significant digits than Decimal's context keeps (it would round
 * them first; the msgspec path does what the reference does). */
static int time_ns(const char *p, size_t n, int64_t *out) {
    char digits[MAX_NUMBER_CHARS];
    int nd = 0, neg = 0;
    /* parse_number refuses a token longer than MAX_NUMBER_CHARS: the digits fit */
    assert(n <= MAX_NUMBER_CHARS);
    if (n > MAX_NUMBER_CHARS) return TIME_DECLINE;
    long nfrac = 0;
    size_t i = 0;
    if (i < n && p[i] == '-') {
        neg = 1;
        i++;
    }
    for (; i < n && p[i] >= '0' && p[i] <= '9'; i++)
        if (nd || p[i] != '0') {
            assert(nd < MAX_NUMBER_CHARS);
            digits[nd++] = p[i];
        }
    if (i < n && p[i] == '.') {
        for (i++; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
            if (nd || p[i] != '0') {
                assert(nd < MAX_NUMBER_CHARS);
                digits[nd++] = p[i];
            }
            nfrac++;
        }
    }
    long exp10 = 0;
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        int eneg = 0;
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-')) {
            eneg = p[i] == '-';
            i++;
        }
        for (; i < n && p[i] >= '0' && p[i] <= '9'; i++)
            if (exp10 < 1000000) exp10 = exp10 * 10 + (p[i] - '0');
        if (eneg) exp10 = -exp10;
    }
    if (nd == 0) { /* zero, whatever its form */
        *out = 0;
        return TIME_OK;
    }
    if (nd > MAX_TIME_DIGITS) return TIME_DECLINE;
    /* the value is 0.D x 10^point, D = digits without leading zeros; ns = value x 10^3 */
    long q = nd - nfrac + exp10 + 3; /* digits of D before the ns point */
    if (q > 19) return TIME_BAD;     /* >= 10^19 ns: beyond int64 */
    uint64_t v = 0;
    for (long k = 0; k < q; k++) v = v * 10 + (k < nd ? (uint64_t)(digits[k] - '0') : 0);
    /* rounded half to even on the digits after the ns point (all of D when q <= 0) */
    int first = 0, rest_nonzero = 0;
    if (q >= 0 && q < nd) {
        first = digits[q] - '0';
        for (long j = q + 1; j < nd; j++)
            if (digits[j] != '0') rest_nonzero = 1;
    } /* q < 0: a zero comes first, below half; q >= nd: nothing after the point */
    if (first > 5 || (first == 5 && (rest_nonzero || (v & 1)))) v++;
    uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (v > lim) return TIME_BAD;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return TIME_OK;
}

/* ------------------------------------------------------------------ generic values */
static void parse_value(Parser *P, Span *out, int level);

/* After an element or a member: 1 past a ',' (another follows), 0 past `close`, -1 for
 * anything else (P->status says why). */
static int after_item(Parser *P, char close) {
    skip_ws(P);
    int c = peek(P);
    if (c == ',') {
        P->p++;
        skip_ws(P);
        return 1;
    }
    if (c == close) {
        P->p++;
        return 0;
    }
    syntax(P);
    return -1;
}

/* ------------------------------------------------------------------ keys given twice */
#define MAX_OBJECT_KEYS 256

static inline uint64_t key_hash64(const char *k, size_t n) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 1099511628211ULL;
    return h;
}

/* Notes a key among those of its object (the object's first in P->keys_seen is at
 * `first`) and declines a key given twice: which value wins, and that the args text
 * keeps one key, is for Python (events.canonical_args_text). A hash met twice declines
 * too, as does an object of more keys than are compared: declining is always safe.
 * 0, or -1 with P->status set. */
static int note_key(Parser *P, const Span *k, size_t first) {
    uint64_t h;
    if (!k->esc) {
        h = key_hash64(k->p, k->n);
    } else {
        size_t at = P->scratch.len;
        if (decode_string(k, &P->scratch)) {
            nomem(P);
            return -1;
        }
        h = key_hash64(P->scratch.data + at, P->scratch.len - at);
        P->scratch.len = at;
    }
    size_t n = P->keys_seen.len / 8;
    assert(first <= n);
    if (n - first >= MAX_OBJECT_KEYS) {
        decline(P, "an object of more than 256 keys");
        return -1;
    }
    for (size_t i = first; i < n; i++) {
        uint64_t seen;
        memcpy(&seen, P->keys_seen.data + i * 8, 8);
        if (seen == h) {
            decline(P, "an object with a key given twice");
            return -1;
        }
    }
    if (buf_append(&P->keys_seen, &h, 8)) {
        nomem(P);
        return -1;
    }
    return 0;
}

/* An object member's key and its ':' (and the whitespace after it): the key's span in
 * `k`; 0 on success, else P->status says why. */
static int parse_member_key(Parser *P, Span *k) {
    if (peek(P) != '"') {
        syntax(P);
        return -1;
    }
    parse_string(P, k);
    if (P->status) return -1;
    skip_ws(P);
    if (peek(P) != ':') {
        syntax(P);
        return -1;
    }
    P->p++;
    skip_ws(P);
    return 0;
}

static void skip_container(Parser *P, int level, char open) {
    char close = open == '{' ? '}' : ']';
    if (level > P->value_levels - 1) {
        decline(P, "nesting near the depth bound");
        return;
    }
    P->p++;
    skip_ws(P);
    if (peek(P) == close) {
        P->p++;
        return;
    }
    size_t first = P->keys_seen.len / 8;
    for (;;) {
        Span s;
        if (open == '{' && (parse_member_key(P, &s) || note_key(P, &s, first))) return;
        parse_value(P, &s, level + 1);
        if (P->status) return;
        int more = after_item(P, close);
        if (more < 0) return;
        if (!more) break;
    }
    P->keys_seen.len = first * 8; /* this object's keys are done with */
}

static void parse_literal(Parser *P, Span *out, const char *word, size_t n, int type) {
    const char *p = P->p;
    size_t have = (size_t)(P->end - p);
    if (have < n) {
        if (memcmp(p, word, have) == 0) P->p = P->end;
        syntax(P);
        return;
    }
    if (memcmp(p, word, n) != 0) {
        syntax(P);
        return;
    }
    out->p = p;
    out->n = n;
    out->type = (uint8_t)type;
    out->esc = 0;
    P->p = p + n;
}

/* Any value at P->p; `level`: its nesting below the event (an event's member is 1). */
static void parse_value(Parser *P, Span *out, int level) {
    int c = peek(P);
    const char *s = P->p;
    switch (c) {
    case '"': parse_string(P, out); return;
    case '{':
    case '[':
        skip_container(P, level, (char)c);
        if (P->status) return;
        out->p = s;
        out->n = (size_t)(P->p - s);
        out->type = c == '{' ? T_OBJECT : T_ARRAY;
        out->esc = 0;
        return;
    case 't': parse_literal(P, out, "true", 4, T_TRUE); return;
    case 'f': parse_literal(P, out, "false", 5, T_FALSE); return;
    case 'n': parse_literal(P, out, "null", 4, T_NULL); return;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            parse_number(P, out);
            return;
        }
        syntax(P);
    }
}

/* ------------------------------------------------------------------ events */
static int compact_append(Buf *out, const char *src, size_t n);

/* A JSON number token (validated) as the reference reader writes its value
 * (events.number_text): an integer as Python's int prints it ("-0" is "0"), a fraction or
 * an exponent as Decimal's str ("1e20" is "1E+20", "0.0000001" is "1E-7", "1.50" stays).
 * 0; -1: out of memory; 1: an exponent of more than 15 digits (for Python to spell). */
static int append_number(Buf *out, const char *p, size_t n) {
    /* every token was checked by parse_number, which refuses a longer one */
    assert(n <= MAX_NUMBER_CHARS);
    if (n > MAX_NUMBER_CHARS) return 1;
    const char *e = p + n, *q = p, *i0, *i1, *f0 = NULL, *f1 = NULL;
    int neg = 0;
    if (q < e && *q == '-') {
        neg = 1;
        q++;
    }
    for (i0 = q; q < e && *q >= '0' && *q <= '9'; q++) {}
    i1 = q;
    if (q < e && *q == '.') {
        for (f0 = ++q; q < e && *q >= '0' && *q <= '9'; q++) {}
        f1 = q;
    }
    int has_exp = q < e && (*q == 'e' || *q == 'E');
    if (!f0 && !has_exp) {
        if (neg && i1 - i0 == 1 && *i0 == '0') return buf_append(out, "0", 1);
        return buf_append(out, p, n);
    }
    long long exp = 0;
    if (has_exp) {
        int eneg = 0;
        q++;
        if (q < e && (*q == '+' || *q == '-')) eneg = *q++ == '-';
        while (q < e && *q == '0') q++;
        if (e - q > 15) return 1;
        for (; q < e; q++) exp = exp * 10 + (*q - '0');
        if (eneg) exp = -exp;
    }
    /* Decimal's coefficient (the digits, leading zeros dropped) and exponent */
    char digits[MAX_NUMBER_CHARS + 1];
    size_t nd = 0;
    for (const char *d = i0; d < i1; d++)
        if (nd || *d != '0') digits[nd++] = *d;
    if (f0) {
        for (const char *d = f0; d < f1; d++)
            if (nd || *d != '0') digits[nd++] = *d;
        exp -= (long long)(f1 - f0);
    }
    if (!nd) digits[nd++] = '0';
    assert(nd <= MAX_NUMBER_CHARS);
    /* Decimal.__str__: plain where the exponent is <= 0 and the number not tiny */
    long long left = exp + (long long)nd, dot = (exp <= 0 && left > -6) ? left : 1;
    char text[MAX_NUMBER_CHARS + 48];
    size_t k = 0;
    if (neg) text[k++] = '-';
    if (dot <= 0) {
        text[k++] = '0';
        text[k++] = '.';
        for (long long z = 0; z < -dot; z++) text[k++] = '0'; /* at most 5 */
        memcpy(text + k, digits, nd);
        k += nd;
    } else if ((size_t)dot >= nd) {
        memcpy(text + k, digits, nd); /* dot == nd: no point */
        k += nd;
    } else {
        memcpy(text + k, digits, (size_t)dot);
        k += (size_t)dot;
        text[k++] = '.';
        memcpy(text + k, digits + dot, nd - (size_t)dot);
        k += nd - (size_t)dot;
    }
    if (left != dot) {
        k += (size_t)snprintf(text + k, sizeof text - k, "E%+lld", left - dot);
    }
    assert(k < sizeof text);
    return buf_append(out, text, k);
}

/* A value's text compact (a string as written, with its quotes; numbers as
 * append_number spells them), to `out`; the return of compact_append. */
static int append_token(Buf *out, const Span *v) {
    if (v->type == T_STRING) return buf_append(out, v->p - 1, v->n + 2);
    if (v->type == T_ARRAY || v->type == T_OBJECT) return compact_append(out, v->p, v->n);
    if (v->type == T_INT || v->type == T_FLOAT) return append_number(out, v->p, v->n);
    return buf_append(out, v->p, v->n);
}
enum { F_PH = 0, F_CAT, F_NAME, F_PID, F_TID, F_TS, F_DUR, F_ID, F_BP, F_S, F_ARGS, N_FIELDS, F_OTHER = -1 };

/* The field a (decoded) event key names. */
static int field_of(const char *k, size_t n) {
    switch (n) {
    case 1: return k[0] == 's' ? F_S : F_OTHER;
    case 2:
        if (k[0] == 'p' && k[1] == 'h') return F_PH;
        if (k[0] == 't' && k[1] == 's') return F_TS;
        if (k[0] == 'i' && k[1] == 'd') return F_ID;
        if (k[0] == 'b' && k[1] == 'p') return F_BP;
        return F_OTHER;
    case 3:
        if (!memcmp(k, "cat", 3)) return F_CAT;
        if (!memcmp(k, "pid", 3)) return F_PID;
        if (!memcmp(k, "tid", 3)) return F_TID;
        if (!memcmp(k, "dur", 3)) return F_DUR;
        return F_OTHER;
    case 4:
        if (!memcmp(k, "name", 4)) return F_NAME;
        if (!memcmp(k, "args", 4)) return F_ARGS;
        return F_OTHER;
    default: return F_OTHER;
    }
}

/* The decoded text of a key span, in P->scratch (reset by the caller); NULL if too long
 * to be a key this parser looks for. */
static const char *key_text(Parser *P, const Span *k, size_t *n) {
    if (!k->esc) {
        *n = k->n;
        return k->p;
    }
    if (k->n > 256) return NULL;
    size_t at = P->scratch.len;
    if (decode_string(k, &P->scratch)) {
        nomem(P);
        return NULL;
    }
    *n = P->scratch.len - at;
    return P->scratch.data + at;
}

static inline unsigned key_hash(const char *k, size_t n) {
    if (n == 0) return 0;
    return ((unsigned)n * 31u + (unsigned char)k[0] * 7u + (unsigned char)k[n - 1] * 3u +
            (unsigned char)k[n / 2]) & (KEY_SLOTS - 1);
}

/* Fills cfg->key_slots from cfg->keys (called once the keys are set). */
void ep_config_index_keys(Config *cfg) {
    memset(cfg->key_slots, 0, sizeof cfg->key_slots);
    for (int i = 0; i < cfg->n_keys; i++) {
        unsigned h = key_hash(cfg->keys[i].key, cfg->keys[i].len);
        while (cfg->key_slots[h]) h = (h + 1) & (KEY_SLOTS - 1);
        cfg->key_slots[h] = (int16_t)(i + 1);
    }
}

static int promoted_column(const Config *cfg, const char *k, size_t n) {
    unsigned h = key_hash(k, n);
    for (;;) {
        int i = cfg->key_slots[h];
        if (!i) return -1;
        const PromotedKey *pk = &cfg->keys[i - 1];
        if (pk->len == n && !memcmp(pk->key, k, n)) return pk->column;
        h = (h + 1) & (KEY_SLOTS - 1);
    }
}

/* An int_list value: its elements into the scratch list, and whether they are all ints
 * that fit int64 (events._conv_int_list, then _fits). */
static void parse_int_list(Parser *P, Slot *slot, int level) {
    const char *s = P->p;
    slot->list_off = P->list_scratch.len / 8;
    slot->list_len = 0;
    slot->list_status = LIST_OK;
    int too_big = 0, not_ints = 0;
    if (level > P->value_levels - 1) {
        decline(P, "nesting near the depth bound");
        return;
    }
    P->p++;
    skip_ws(P);
    if (peek(P) != ']') {
        for (;;) {
            Span e;
            parse_value(P, &e, level + 1);
            if (P->status) return;
            if (e.type == T_INT) {
                int64_t v;
                if (int_token(e.p, e.n, &v)) {
                    if (buf_append(&P->list_scratch, &v, 8)) {
                        nomem(P);
                        return;
                    }
                    slot->list_len++;
                } else {
                    too_big = 1;
                }
            } else {
                not_ints = 1;
            }
            int more = after_item(P, ']');
            if (more < 0) return;
            if (!more) break;
        }
    } else {
        P->p++;
    }
    slot->list_status = not_ints ? LIST_NOT_INTS : too_big ? LIST_TOO_BIG : LIST_OK;
    slot->v.p = s;
    slot->v.n = (size_t)(P->p - s);
    slot->v.type = T_ARRAY;
    slot->v.esc = 0;
}

/* The args object of an event: its promoted keys into the event's slots, and its text
 * as written without whitespace into `out` (the args column's, whose caller takes it back
 * if the row is dropped): one pass over the text instead of a second one to copy it. */
static void parse_args_object(Parser *P, Buf *out) {
    P->p++;
    skip_ws(P);
    if (buf_append(out, "{", 1)) {
        nomem(P);
        return;
    }
    if (peek(P) == '}') {
        P->p++;
        if (buf_append(out, "}", 1)) nomem(P);
        return;
    }
    size_t first = P->keys_seen.len / 8;
    for (;;) {
        Span k, v;
        if (parse_member_key(P, &k) || note_key(P, &k, first)) return;
        if (buf_append(out, k.p - 1, k.n + 2) || buf_append(out, ":", 1)) {
            nomem(P);
            return;
        }
        size_t kn = 0;
        P->scratch.len = 0;
        const char *kt = key_text(P, &k, &kn);
        if (P->status) return;
        int col = kt ? promoted_column(P->cfg, kt, kn) : -1;
        if (col >= 0) {
            if (P->slot_mask & (1ULL << col)) {
                /* a key given twice, or two spellings of one column: which value wins is
                 * Python's dict order (the msgspec path applies events.promote_args) */
                decline(P, "an args key for a promoted column given twice");
                return;
            }
            Slot *slot = &P->slots[col];
            if (P->cfg->kinds[col] == KIND_INT_LIST && peek(P) == '[') {
                parse_int_list(P, slot, 2);
            } else {
                parse_value(P, &v, 2);
                slot->v = v;
            }
            if (P->status) return;
            P->slot_mask |= 1ULL << col;
            v = slot->v;
        } else {
            parse_value(P, &v, 2);
            if (P->status) return;
        }
        int rc = append_token(out, &v);
        if (rc > 0) decline(P, "a number with an exponent of more than 15 digits");
        if (rc) {
            nomem(P);
            return;
        }
        int more = after_item(P, '}');
        if (more < 0) return;
        if (buf_append(out, more ? "," : "}", 1)) {
            nomem(P);
            return;
        }
        if (!more) {
            P->keys_seen.len = first * 8;
            return;
        }
    }
}

/* ------------------------------------------------------------------ emitting a row */
/* The text of a text field (ph, cat, name, pid, tid, id, bp, s), as events.id_text
 * gives it: a string decoded, an integer in decimal, true/false; NULL (returns 0) for
 * null or absent. Floats, arrays and objects were declined before. */
static int field_text(const Span *s, Buf *out) {
    switch (s->type) {
    case T_STRING: return decode_string(s, out);
    case T_INT:
        if (s->n == 2 && s->p[0] == '-' && s->p[1] == '0') return buf_append(out, "0", 1);
        return buf_append(out, s->p, s->n);
    case T_TRUE: return buf_append(out, "true", 4);
    case T_FALSE: return buf_append(out, "false", 5);
    default: return 0; /* null or absent: NULL */
    }
}

static int emit_text(Parser *P, int column, const Span *s, size_t row) {
    Col *c = &P->base_cols[column];
    if (s->type == T_ABSENT || s->type == T_NULL) return 0; /* padded as NULL later */
    if (col_pad(c, row)) return -1;
    if (field_text(s, &c->data)) return -1;
    return col_close_var(c, row);
}

/* The text of a validated value, whitespace outside strings removed (msgspec.json.format
 * with indent=-1: strings as written), numbers as append_number spells them, appended to
 * `out`. 0; -1: out of memory; 1: a number for Python to spell. */
static int compact_append(Buf *out, const char *src, size_t n) {
    if (buf_reserve(out, n)) return -1;
    const char *p = src, *e = src + n;
    while (p < e) {
        /* a run of structural bytes: neither whitespace, a quote nor a number */
        const char *r = p;
        while (p < e && *p != '"' && *p != ' ' && *p != '\n' && *p != '\r' && *p != '\t' && *p != '-' &&
               (*p < '0' || *p > '9'))
            p++;
        if (buf_append(out, r, (size_t)(p - r))) return -1;
        if (p >= e) break;
        if (*p == '-' || (*p >= '0' && *p <= '9')) {
            r = p;
            while (p < e && ((*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == '.' || *p == 'e' ||
                             *p == 'E'))
                p++;
            int rc = append_number(out, r, (size_t)(p - r));
            if (rc) return rc;
            continue;
        }
        if (*p != '"') {
            p++;
            continue;
        }
        /* a string, copied as written up to its closing quote */
        r = p++;
        for (;;) {
            while (e - p >= 8) {
                uint64_t w;
                memcpy(&w, p, 8);
                if (HAS_ZERO(w ^ (ONES * '"')) | HAS_ZERO(w ^ (ONES * '\\'))) break;
                p += 8;
            }
            while (p < e && *p != '"' && *p != '\\') p++;
            if (p >= e) break;
            if (*p == '\\') {
                p += 2;
                continue;
            }
            p++; /* the closing quote */
            break;
        }
        if (buf_append(out, r, (size_t)(p - r))) return -1;
    }
    return 0;
}

/* The args text of a row (a value that is not an object; objects are written while
 * they are parsed, parse_args_object): 0, -1 out of memory, 1 declined. */
static int emit_compact(Parser *P, Col *c, size_t row, const Span *s) {
    if (col_pad(c, row)) return -1;
    int rc = compact_append(&c->data, s->p, s->n); /* a string's span has its quotes here */
    if (rc > 0) decline(P, "a number with an exponent of more than 15 digits");
    if (rc) return rc;
    return col_close_var(c, row);
}

/* Declines what the text fields cannot take with certainty here (events.id_text's float
 * repr and JSON of containers need Python). */
static int text_field_ok(Parser *P, const Span *s) {
    if (s->type == T_FLOAT || s->type == T_ARRAY || s->type == T_OBJECT) {
        decline(P, "a float, array or object in a text field");
        return 0;
    }
    return 1;
}

static int is_simple_int_text(const Span *s) {
    if (s->esc || s->n == 0 || s->n > MAX_NUMBER_CHARS) return 0;
    size_t i = (s->p[0] == '-' || s->p[0] == '+') ? 1 : 0;
    if (i >= s->n) return 0;
    for (; i < s->n; i++)
        if (s->p[i] < '0' || s->p[i] > '9') return 0;
    return 1;
}

/* ^-?[0-9]{1,300}(\.[0-9]{1,300})?([eE][-+]?[0-9]{1,3})?$ (fast_reader._FLOAT_TEXT) */
static int is_simple_float_text(const Span *s) {
    if (s->esc || s->n == 0 || s->n > MAX_NUMBER_CHARS) return 0;
    const char *p = s->p, *e = s->p + s->n;
    if (*p == '-') p++;
    const char *d = p;
    while (p < e && *p >= '0' && *p <= '9') p++;
    if (p == d) return 0;
    if (p < e && *p == '.') {
        d = ++p;
        while (p < e && *p >= '0' && *p <= '9') p++;
        if (p == d) return 0;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        d = p;
        while (p < e && *p >= '0' && *p <= '9') p++;
        if (p == d || p - d > 3) return 0;
    }
    return p == e;
}

/* Text that neither Python's Decimal nor float() can read as a number: empty, or ASCII
 * with a character no number, "Infinity" or "NaN" is spelled with ("0x0", "N/A",
 * "/job:worker/device:CPU:0"). Non-ASCII text may hold Unicode digits, which both read. */
static int is_surely_not_a_number(const Span *s) {
    if (s->esc) return 0;
    if (s->n == 0) return 1;
    static const char spelled[] = "0123456789+-._eE infatyINFATYsS";
    int outside = 0;
    for (size_t i = 0; i < s->n; i++) {
        unsigned char c = (unsigned char)s->p[i];
        if (c >= 0x80) return 0;
        if (!memchr(spelled, c, sizeof spelled - 1)) outside = 1;
    }
    return outside;
}

/* Checks a promoted value before the row is kept: declines what needs Python. */
static void check_promoted(Parser *P, int col, const Slot *slot) {
    const Span *v = &slot->v;
    switch (P->cfg->kinds[col]) {
    case KIND_INT:
        if (v->type == T_STRING && !is_simple_int_text(v) && !is_surely_not_a_number(v))
            decline(P, "a promoted integer written as text that is not plain digits");
        return;
    case KIND_FLOAT:
        if (v->type == T_STRING && !is_simple_float_text(v) && !is_surely_not_a_number(v))
            decline(P, "a promoted float written as text that is not a plain number");
        return;
    case KIND_STR:
        if (v->type == T_FLOAT || v->type == T_ARRAY)
            decline(P, "a promoted text value written as a float or an array");
        return;
    default: return;
    }
}

static int emit_promoted(Parser *P, int col, const Slot *slot, size_t row, int *too_big) {
    const Span *v = &slot->v;
    Col *c = &P->promoted[col];
    *too_big = 0;
    switch (P->cfg->kinds[col]) {
    case KIND_INT: {
        int64_t x;
        if (v->type == T_STRING && !is_simple_int_text(v)) return 0; /* not a number: NULL */
        if (v->type == T_INT || v->type == T_STRING) {
            if (int_token(v->p, v->n, &x)) return col_i64(c, row, x);
            *too_big = 1;
            return 0;
        }
        if (v->type == T_FLOAT) {
            double d = to_double(P, v->p, v->n);
            if (!isfinite(d) || d != floor(d)) return 0;
            if (d >= 9223372036854775808.0 || d < -9223372036854775808.0) {
                *too_big = 1;
                return 0;
            }
            return col_i64(c, row, (int64_t)d);
        }
        return 0;
    }
    case KIND_FLOAT: {
        if (v->type == T_STRING && !is_simple_float_text(v)) return 0; /* not a number: NULL */
        if (v->type == T_INT || v->type == T_FLOAT || v->type == T_STRING) {
            double d = to_double(P, v->p, v->n);
            if (!isfinite(d)) return 0;
            return col_f64(c, row, d);
        }
        return 0;
    }
    case KIND_STR: {
        if (v->type == T_NULL || v->type == T_OBJECT || v->type == T_ABSENT) return 0;
        if (col_pad(c, row)) return -1;
        if (field_text(v, &c->data)) return -1;
        return col_close_var(c, row);
    }
    case KIND_INT_LIST: {
        if (v->type != T_ARRAY || slot->list_status == LIST_NOT_INTS) return 0;
        if (slot->list_status == LIST_TOO_BIG) {
            *too_big = 1;
            return 0;
        }
        if (col_pad(c, row)) return -1;
        if (slot->list_len &&  /* an empty list: no pointer into a scratch buffer that may be NULL */
            buf_append(&c->data, P->list_scratch.data + slot->list_off * 8, slot->list_len * 8))
            return -1;
        return col_close_var(c, row);
    }
    }
    return 0;
}

static int add_drop(Parser *P, int reason, const Span *ph) {
    size_t at = P->drops.len;
    int32_t head[2] = {reason, 0};
    if (buf_append(&P->drops, head, 8)) return -1;
    if (ph) {
        size_t before = P->drops.len;
        if (field_text(ph, &P->drops)) return -1;
        int32_t n = (int32_t)(P->drops.len - before);
        memcpy(P->drops.data + at + 4, &n, 4);
    }
    return 0;
}

static inline int lowest_bit(uint64_t m) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(m);
#else
    int i = 0;
    while (!(m & 1)) {
        m >>= 1;
        i++;
    }
    return i;
#endif
}

/* ------------------------------------------------------------------ one event */
/* What an event's members gave: the fields' spans, how many keys it had, and whether
 * its args object's compact text is in the args column already (from args_mark on). */
typedef struct {
    Span f[N_FIELDS];
    int nkeys;
    int args_written;
    size_t args_mark;
} EventFields;

/* The args member's value at P->p: an object is written to the args column as it is
 * read (parse_args_object), anything else kept as a span (a string with its quotes).
 * 0, or -1 with P->status set. */
static int read_args(Parser *P, EventFields *ev) {
    Col *args_col = &P->base_cols[C_ARGS];
    Span *a = &ev->f[F_ARGS];
    const char *vs = P->p;
    if (peek(P) == '{') {
        if (P->value_levels < 2) {
            decline(P, "nesting near the depth bound");
            return -1;
        }
        /* the rows before this one are NULL up to here: its text goes after them */
        if (col_pad(args_col, P->rows)) {
            nomem(P);
            return -1;
        }
        ev->args_mark = args_col->data.len;
        parse_args_object(P, &args_col->data);
        if (P->status) return -1;
        ev->args_written = 1;
        a->p = vs;
        a->n = (size_t)(P->p - vs);
        a->type = T_OBJECT;
        return 0;
    }
    parse_value(P, a, 1);
    if (P->status) return -1;
    if (a->type == T_STRING) { /* the text as written, quotes included */
        a->p = vs;
        a->n = (size_t)(P->p - vs);
    }
    return 0;
}

/* The members of the event at P->p (its '{') into `ev`: a field given twice keeps its
 * last value, as Python's parsers do; two args members are declined. 0, or -1. */
static int read_event_fields(Parser *P, EventFields *ev) {
    int args_seen = 0;
    for (int i = 0; i < N_FIELDS; i++) ev->f[i].type = T_ABSENT; /* all a field is read by when absent */
    ev->nkeys = 0;
    ev->args_written = 0;
    ev->args_mark = 0;
    P->slot_mask = 0;
    P->list_scratch.len = 0;
    P->p++;
    skip_ws(P);
    if (peek(P) == '}') {
        P->p++;
        return 0;
    }
    for (;;) {
        Span k, ignored;
        if (parse_member_key(P, &k)) return -1;
        size_t kn = 0;
        P->scratch.len = 0;
        const char *kt = key_text(P, &k, &kn);
        if (P->status) return -1;
        int field = kt ? field_of(kt, kn) : F_OTHER;
        ev->nkeys++;
        if (field == F_ARGS) {
            if (args_seen) {
                decline(P, "an event with two args keys");
                return -1;
            }
            args_seen = 1;
            if (read_args(P, ev)) return -1;
        } else {
            parse_value(P, field != F_OTHER ? &ev->f[field] : &ignored, 1);
            if (P->status) return -1;
        }
        int more = after_item(P, '}');
        if (more < 0) return -1;
        if (!more) return 0;
    }
}

/* Declines what this parser cannot take with certainty (B/E pairs, an escaped ph, a
 * text field that needs Python's repr, a time that is not a number, a promoted value
 * that needs Python); *is_m: a metadata event (kept without a ts). 0, or -1. */
static int check_event(Parser *P, const EventFields *ev, int *is_m) {
    const Span *f = ev->f, *ph = &f[F_PH];
    *is_m = 0;
    if (ph->type == T_STRING && !ph->esc && ph->n == 1) {
        if (ph->p[0] == 'B' || ph->p[0] == 'E') {
            decline(P, "B/E events");
            return -1;
        }
        *is_m = ph->p[0] == 'M';
    } else if (ph->type == T_STRING && ph->esc) {
        decline(P, "an escaped ph");
        return -1;
    }
    for (int i = F_PH; i <= F_S; i++) {
        if (i == F_TS || i == F_DUR) continue;
        if (!text_field_ok(P, &f[i])) return -1;
    }
    for (int i = F_TS; i <= F_DUR; i++) {
        uint8_t t = f[i].type;
        if (!(t == T_ABSENT || t == T_NULL || t == T_INT || t == T_FLOAT)) {
            decline(P, "a ts or dur that is not a number");
            return -1;
        }
    }
    if (f[F_ARGS].type != T_OBJECT) {
        P->slot_mask = 0; /* only an object's keys are promoted */
        return 0;
    }
    for (uint64_t mask = P->slot_mask; mask; mask &= mask - 1) {
        int col = lowest_bit(mask);
        check_promoted(P, col, &P->slots[col]);
        if (P->status) return -1;
    }
    return 0;
}

/* The event's ts (the base added) and dur in ns, and its drop reason in events.py's
 * order (-1: kept). 0, or -1: declined (a time with more digits than Decimal keeps). */
static int event_times(Parser *P, const EventFields *ev, int is_m, int *reason, int64_t *ts, int64_t *dur) {
    const Span *f = ev->f;
    int has_ts = f[F_TS].type == T_INT || f[F_TS].type == T_FLOAT;
    int has_dur = f[F_DUR].type == T_INT || f[F_DUR].type == T_FLOAT;
    *reason = -1;
    *ts = *dur = 0;
    if (!has_ts && !is_m) *reason = DROP_NO_TS;
    if (*reason < 0 && has_ts) {
        int r = time_ns(f[F_TS].p, f[F_TS].n, ts);
        if (r == TIME_DECLINE) {
            decline(P, "a ts with more digits than Decimal keeps");
            return -1;
        }
        if (r == TIME_BAD) *reason = DROP_BAD_TS;
        else if (P->base && ((P->base > 0 && *ts > INT64_MAX - P->base) || (P->base < 0 && *ts < INT64_MIN - P->base)))
            *reason = DROP_BAD_TS;
        else
            *ts += P->base;
    }
    if (has_dur) {
        int r = time_ns(f[F_DUR].p, f[F_DUR].n, dur);
        if (r == TIME_DECLINE) {
            decline(P, "a dur with more digits than Decimal keeps");
            return -1;
        }
        if (*reason < 0) {
            if (r == TIME_BAD) *reason = DROP_BAD_DUR;
            else if (*dur < 0) *reason = DROP_NEGATIVE_DUR;
            else if (has_ts && *ts > INT64_MAX - *dur) *reason = DROP_BAD_DUR;
        }
    }
    return 0;
}

/* The category of a row: a legacy name mapped to today's, the original in cat_raw. */
static int emit_category(Parser *P, const Span *cat_span, size_t row) {
    uint8_t t = cat_span->type;
    if (!(t == T_STRING || t == T_INT || t == T_TRUE || t == T_FALSE)) return 0; /* NULL */
    Col *cat = &P->base_cols[C_CAT];
    size_t at = cat->data.len;
    if (col_pad(cat, row) || field_text(cat_span, &cat->data)) return -1;
    size_t n = cat->data.len - at;
    for (int i = 0; i < P->cfg->n_legacy; i++) {
        if (P->cfg->legacy_old_len[i] == n && !memcmp(cat->data.data + at, P->cfg->legacy_old[i], n)) {
            if (col_str(&P->base_cols[C_CAT_RAW], row, P->cfg->legacy_old[i], n)) return -1;
            cat->data.len = at;
            if (buf_append(&cat->data, P->cfg->legacy_new[i], P->cfg->legacy_new_len[i])) return -1;
            break;
        }
    }
    return col_close_var(cat, row);
}

/* The row of a kept event, P->rows (the caller counts it). 0, or -1: out of memory, or
 * declined (P->status says which). */
static int emit_row(Parser *P, const EventFields *ev, int64_t index, int64_t ts, int64_t dur) {
    const Span *f = ev->f;
    size_t row = P->rows;
    Col *cols = P->base_cols;
    if (col_i64(&cols[C_IDX], row, index) || emit_text(P, C_PH, &f[F_PH], row) ||
        emit_category(P, &f[F_CAT], row) || emit_text(P, C_NAME, &f[F_NAME], row) ||
        emit_text(P, C_PID, &f[F_PID], row) || emit_text(P, C_TID, &f[F_TID], row))
        return -1;
    if ((f[F_TS].type == T_INT || f[F_TS].type == T_FLOAT) && col_i64(&cols[C_TS], row, ts)) return -1;
    if ((f[F_DUR].type == T_INT || f[F_DUR].type == T_FLOAT) && col_i64(&cols[C_DUR], row, dur)) return -1;
    if (emit_text(P, C_ID, &f[F_ID], row) || emit_text(P, C_BP, &f[F_BP], row) || emit_text(P, C_S, &f[F_S], row))
        return -1;
    if (ev->args_written) {
        if (col_close_var(&cols[C_ARGS], row)) return -1;
    } else if (f[F_ARGS].type != T_ABSENT && f[F_ARGS].type != T_NULL &&
               emit_compact(P, &cols[C_ARGS], row, &f[F_ARGS])) {
        return -1;
    }
    for (uint64_t mask = P->slot_mask; mask; mask &= mask - 1) {
        int col = lowest_bit(mask), too_big;
        if (emit_promoted(P, col, &P->slots[col], row, &too_big)) return -1;
        if (too_big) P->out_of_range[col]++;
    }
    return 0;
}

/* One event at P->p (its '{'): a row, a drop counted, or a decline. */
static void parse_event(Parser *P, int64_t index) {
    EventFields ev;
    const char *start = P->p;
    int is_m, reason;
    int64_t ts, dur;
    if (read_event_fields(P, &ev)) return;
    if ((size_t)(P->p - start) + 2 >= P->max_event) {
        decline(P, "an event near the event bound");
        return;
    }
    if (check_event(P, &ev, &is_m)) return;
    if (ev.nkeys == 0) {
        P->last_empty = index;
        if (add_drop(P, DROP_EMPTY_OBJECT, NULL)) nomem(P);
        return;
    }
    if (event_times(P, &ev, is_m, &reason, &ts, &dur)) return;
    if (reason >= 0) {
        if (ev.args_written) P->base_cols[C_ARGS].data.len = ev.args_mark; /* the dropped row's args text goes */
        if (add_drop(P, reason, &ev.f[F_PH])) nomem(P);
        return;
    }
    if (emit_row(P, &ev, index, ts, dur)) {
        nomem(P); /* (a decline said why first, and stays) */
        return;
    }
    P->rows++;
}

/* ------------------------------------------------------------------ the chunk */
void ep_parser_init(Parser *P, const Config *cfg, const char *data, size_t n) {
    memset(P, 0, sizeof *P);
    P->cfg = cfg;
    P->p = data;
    P->end = data + n;
    P->last_empty = -1;
    static const int types[N_BASE] = {COL_I64, COL_STR, COL_STR, COL_STR, COL_STR, COL_STR, COL_STR,
                                      COL_I64, COL_I64, COL_STR, COL_STR, COL_STR, COL_STR};
    for (int i = 0; i < N_BASE; i++)
        if (col_init(&P->base_cols[i], types[i])) P->status = EP_NOMEM;
    for (int i = 0; i < cfg->n_columns; i++) {
        int k = cfg->kinds[i];
        if (col_init(&P->promoted[i], k == KIND_INT ? COL_I64 : k == KIND_FLOAT ? COL_F64 : k == KIND_STR ? COL_STR
                                                                                                          : COL_LIST))
            P->status = EP_NOMEM;
    }
}

void ep_parser_free(Parser *P) {
    for (int i = 0; i < N_BASE; i++) col_free(&P->base_cols[i]);
    for (int i = 0; i < MAX_PROMOTED; i++) col_free(&P->promoted[i]);
    buf_free(&P->drops);
    buf_free(&P->list_scratch);
    buf_free(&P->scratch);
    buf_free(&P->keys_seen);
}

/* Parses `[` events `]`: every entry, objects as events, others counted as dropped. */
void ep_parse_chunk(Parser *P) {
    if (P->status) return;
    skip_ws(P);
    if (peek(P) != '[') {
        syntax(P);
        return;
    }
    P->p++;
    skip_ws(P);
    if (peek(P) == ']') {
        P->p++;
    } else {
        for (;;) {
            int64_t index = (int64_t)P->entries;
            const char *s = P->p;
            if (peek(P) == '{') {
                if (P->value_levels < 1) {
                    decline(P, "nesting near the depth bound");
                    return;
                }
                parse_event(P, index);
            } else {
                Span ignored;
                parse_value(P, &ignored, 0);
                if (!P->status && (size_t)(P->p - s) + 2 >= P->max_event) decline(P, "an entry near the event bound");
                if (!P->status && add_drop(P, DROP_NOT_AN_OBJECT, NULL)) nomem(P);
            }
            if (P->status) return;
            P->entries++;
            int more = after_item(P, ']');
            if (more < 0) return;
            if (!more) break;
        }
    }
    skip_ws(P);
    if (P->p != P->end) {
        syntax(P);
        return;
    }
    for (int i = 0; i < N_BASE; i++)
        if (col_pad(&P->base_cols[i], P->rows)) {
            nomem(P);
            return;
        }
    for (int i = 0; i < P->cfg->n_columns; i++)
        if (P->promoted[i].touched && col_pad(&P->promoted[i], P->rows)) { /* untouched: all NULL, not returned */
            nomem(P);
            return;
        }
}
