/*
 * The compiled parser's JSON scanner (see eventparse_internal.h for what it offers the
 * event code in eventparse_core.c): strings and their escapes, numbers, exact times,
 * generic values and keys given twice; then the text of numbers and values as the
 * reference reader writes them into ``args``. Invariants are asserted where they are
 * used; the asserts are on in sanitizer builds (.ci/run builds with ASan/UBSan) and
 * wherever NDEBUG is unset.
 */
#include "eventparse_internal.h" /* first: it sets _GNU_SOURCE and the asserts */

/* ------------------------------------------------------------------ errors */
void ep_decline(Parser *P, const char *why) {
    if (P->status == EP_OK) {
        P->status = EP_DECLINE;
        P->why = why;
    }
}

/* A syntax error at `P->p`: at the chunk's last byte (its closing ']') or beyond, the
 * cut fell inside a value; earlier, the text is not JSON (the msgspec path says so). */
void ep_syntax(Parser *P) {
    if (P->status != EP_OK) return;
    if (P->p >= P->end - 1) {
        P->status = EP_BOUNDARY;
        P->why = "the text ends inside an event";
    } else {
        P->status = EP_DECLINE;
        P->why = "invalid JSON";
    }
}

void ep_nomem(Parser *P) {
    if (P->status != EP_OK) return; /* a decline (or a cut) said first why */
    P->status = EP_NOMEM;
    P->why = "out of memory";
}

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
            ep_syntax(P);
            return;
        }
        unsigned c = *p;
        if (c == '"') break;
        if (c == '\\') {
            esc = 1;
            if (e - p < 2) {
                P->p = (const char *)e;
                ep_syntax(P);
                return;
            }
            unsigned d = p[1];
            if (d == 'u') {
                unsigned u;
                int r = read_hex4((const char *)p + 2, (const char *)e, &u);
                if (r < 0) {
                    P->p = (const char *)p;
                    ep_syntax(P);
                    return;
                }
                if (u == 0) {
                    P->p = (const char *)p;
                    ep_decline(P, "a \\u0000 escape");
                    return;
                }
                if (u >= 0xD800 && u <= 0xDBFF) {
                    unsigned u2;
                    if (e - p < 12) {
                        /* a pair cut off, or a lone surrogate: the msgspec path tells */
                        P->p = (const char *)p;
                        ep_decline(P, "a surrogate escape at the end of the text");
                        return;
                    }
                    if (p[6] != '\\' || p[7] != 'u' || read_hex4((const char *)p + 8, (const char *)e, &u2) ||
                        u2 < 0xDC00 || u2 > 0xDFFF) {
                        P->p = (const char *)p;
                        ep_decline(P, "a lone surrogate escape");
                        return;
                    }
                    p += 12;
                } else if (u >= 0xDC00 && u <= 0xDFFF) {
                    P->p = (const char *)p;
                    ep_decline(P, "a lone surrogate escape");
                    return;
                } else {
                    p += 6;
                }
            } else if (d == '"' || d == '\\' || d == '/' || d == 'b' || d == 'f' || d == 'n' || d == 'r' ||
                       d == 't') {
                p += 2;
            } else {
                P->p = (const char *)p;
                ep_syntax(P);
                return;
            }
            continue;
        }
        if (c < 0x20) {
            P->p = (const char *)p;
            ep_syntax(P);
            return;
        }
        if (c >= 0x80) {
            int n = utf8_seq(p, e);
            if (n <= 0) {
                P->p = (const char *)p;
                ep_decline(P, "invalid UTF-8");
                return;
            }
            p += n;
            continue;
        }
        p++;
    }
    size_t n = (size_t)(p - s);
    if (n + 2 >= P->max_string) {
        ep_decline(P, "a string near the string bound");
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
int ep_decode_string(const Span *s, Buf *out) {
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
        ep_syntax(P);
        return;
    }
    if (p < e && *p == '.') {
        is_float = 1;
        p++;
        if (p >= e) goto cut;
        if (!(*p >= '0' && *p <= '9')) {
            P->p = p;
            ep_syntax(P);
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
            ep_syntax(P);
            return;
        }
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    if (p >= e) goto cut; /* a number cannot end the chunk: its ']' follows */
    if ((size_t)(p - s) > MAX_NUMBER_CHARS) {
        P->p = s;
        ep_decline(P, "a number of more than 100 characters");
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
    ep_syntax(P);
}

/* An integer token (validated, at most MAX_NUMBER_CHARS) to int64; 0 if it does not fit. */
int ep_int_token(const char *p, size_t n, int64_t *out) {
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
double ep_to_double(Parser *P, const char *p, size_t n) {
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

/* Microseconds as written to exact ns: the decimal value times 1000, rounded half to
 * even to an integer that fits in int64 (events.time_ns). TIME_BAD: out of range;
 * TIME_DECLINE: more significant digits than Decimal's context keeps (it would round
 * them first; the msgspec path does what the reference does). */
int ep_time_ns(const char *p, size_t n, int64_t *out) {
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

/* After an element or a member: 1 past a ',' (another follows), 0 past `close`, -1 for
 * anything else (P->status says why). */
int ep_after_item(Parser *P, char close) {
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
    ep_syntax(P);
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
int ep_note_key(Parser *P, const Span *k, size_t first) {
    uint64_t h;
    if (!k->esc) {
        h = key_hash64(k->p, k->n);
    } else {
        size_t at = P->scratch.len;
        if (ep_decode_string(k, &P->scratch)) {
            ep_nomem(P);
            return -1;
        }
        h = key_hash64(P->scratch.data + at, P->scratch.len - at);
        P->scratch.len = at;
    }
    size_t n = P->keys_seen.len / 8;
    assert(first <= n);
    if (n - first >= MAX_OBJECT_KEYS) {
        ep_decline(P, "an object of more than 256 keys");
        return -1;
    }
    for (size_t i = first; i < n; i++) {
        uint64_t seen;
        memcpy(&seen, P->keys_seen.data + i * 8, 8);
        if (seen == h) {
            ep_decline(P, "an object with a key given twice");
            return -1;
        }
    }
    if (buf_append(&P->keys_seen, &h, 8)) {
        ep_nomem(P);
        return -1;
    }
    return 0;
}

/* An object member's key and its ':' (and the whitespace after it): the key's span in
 * `k`; 0 on success, else P->status says why. */
int ep_parse_member_key(Parser *P, Span *k) {
    if (peek(P) != '"') {
        ep_syntax(P);
        return -1;
    }
    parse_string(P, k);
    if (P->status) return -1;
    skip_ws(P);
    if (peek(P) != ':') {
        ep_syntax(P);
        return -1;
    }
    P->p++;
    skip_ws(P);
    return 0;
}

static void skip_container(Parser *P, int level, char open) {
    char close = open == '{' ? '}' : ']';
    if (level > P->value_levels - 1) {
        ep_decline(P, "nesting near the depth bound");
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
        if (open == '{' && (ep_parse_member_key(P, &s) || ep_note_key(P, &s, first))) return;
        ep_parse_value(P, &s, level + 1);
        if (P->status) return;
        int more = ep_after_item(P, close);
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
        ep_syntax(P);
        return;
    }
    if (memcmp(p, word, n) != 0) {
        ep_syntax(P);
        return;
    }
    out->p = p;
    out->n = n;
    out->type = (uint8_t)type;
    out->esc = 0;
    P->p = p + n;
}

/* Any value at P->p; `level`: its nesting below the event (an event's member is 1). */
void ep_parse_value(Parser *P, Span *out, int level) {
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
        ep_syntax(P);
    }
}

/* ------------------------------------------------------------------ number and value text */
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
int ep_append_token(Buf *out, const Span *v) {
    if (v->type == T_STRING) return buf_append(out, v->p - 1, v->n + 2);
    if (v->type == T_ARRAY || v->type == T_OBJECT) return ep_compact_append(out, v->p, v->n);
    if (v->type == T_INT || v->type == T_FLOAT) return append_number(out, v->p, v->n);
    return buf_append(out, v->p, v->n);
}
/* The text of a validated value, whitespace outside strings removed (msgspec.json.format
 * with indent=-1: strings as written), numbers as append_number spells them, appended to
 * `out`. 0; -1: out of memory; 1: a number for Python to spell. */
int ep_compact_append(Buf *out, const char *src, size_t n) {
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
