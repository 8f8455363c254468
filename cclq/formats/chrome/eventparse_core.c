/*
 * The compiled chunk parser: the implementation of eventparse_core.h (read that first).
 *
 * Layout: an event's fields (the promoted keys, int lists, the args object); emitting a
 * row; one event (its checks and drop reason); the chunk. The JSON scanner it calls is
 * eventparse_json.c, the column buffers eventparse_internal.h. Invariants are asserted
 * where they are used; the asserts are on in sanitizer builds (.ci/run builds with
 * ASan/UBSan) and wherever NDEBUG is unset.
 */
#include "eventparse_internal.h" /* first: it sets _GNU_SOURCE and the asserts */

/* ------------------------------------------------------------------ events */
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
    if (ep_decode_string(k, &P->scratch)) {
        ep_nomem(P);
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
        ep_decline(P, "nesting near the depth bound");
        return;
    }
    P->p++;
    skip_ws(P);
    if (peek(P) != ']') {
        for (;;) {
            Span e;
            ep_parse_value(P, &e, level + 1);
            if (P->status) return;
            if (e.type == T_INT) {
                int64_t v;
                if (ep_int_token(e.p, e.n, &v)) {
                    if (buf_append(&P->list_scratch, &v, 8)) {
                        ep_nomem(P);
                        return;
                    }
                    slot->list_len++;
                } else {
                    too_big = 1;
                }
            } else {
                not_ints = 1;
            }
            int more = ep_after_item(P, ']');
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
        ep_nomem(P);
        return;
    }
    if (peek(P) == '}') {
        P->p++;
        if (buf_append(out, "}", 1)) ep_nomem(P);
        return;
    }
    size_t first = P->keys_seen.len / 8;
    for (;;) {
        Span k, v;
        if (ep_parse_member_key(P, &k) || ep_note_key(P, &k, first)) return;
        if (buf_append(out, k.p - 1, k.n + 2) || buf_append(out, ":", 1)) {
            ep_nomem(P);
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
                ep_decline(P, "an args key for a promoted column given twice");
                return;
            }
            Slot *slot = &P->slots[col];
            if (P->cfg->kinds[col] == KIND_INT_LIST && peek(P) == '[') {
                parse_int_list(P, slot, 2);
            } else {
                ep_parse_value(P, &v, 2);
                slot->v = v;
            }
            if (P->status) return;
            P->slot_mask |= 1ULL << col;
            v = slot->v;
        } else {
            ep_parse_value(P, &v, 2);
            if (P->status) return;
        }
        int rc = ep_append_token(out, &v);
        if (rc > 0) ep_decline(P, "a number with an exponent of more than 15 digits");
        if (rc) {
            ep_nomem(P);
            return;
        }
        int more = ep_after_item(P, '}');
        if (more < 0) return;
        if (buf_append(out, more ? "," : "}", 1)) {
            ep_nomem(P);
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
    case T_STRING: return ep_decode_string(s, out);
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
/* The args text of a row (a value that is not an object; objects are written while
 * they are parsed, parse_args_object): 0, -1 out of memory, 1 declined. */
static int emit_compact(Parser *P, Col *c, size_t row, const Span *s) {
    if (col_pad(c, row)) return -1;
    int rc = ep_compact_append(&c->data, s->p, s->n); /* a string's span has its quotes here */
    if (rc > 0) ep_decline(P, "a number with an exponent of more than 15 digits");
    if (rc) return rc;
    return col_close_var(c, row);
}

/* Declines what the text fields cannot take with certainty here (events.id_text's float
 * repr and JSON of containers need Python). */
static int text_field_ok(Parser *P, const Span *s) {
    if (s->type == T_FLOAT || s->type == T_ARRAY || s->type == T_OBJECT) {
        ep_decline(P, "a float, array or object in a text field");
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
            ep_decline(P, "a promoted integer written as text that is not plain digits");
        return;
    case KIND_FLOAT:
        if (v->type == T_STRING && !is_simple_float_text(v) && !is_surely_not_a_number(v))
            ep_decline(P, "a promoted float written as text that is not a plain number");
        return;
    case KIND_STR:
        if (v->type == T_FLOAT || v->type == T_ARRAY)
            ep_decline(P, "a promoted text value written as a float or an array");
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
            if (ep_int_token(v->p, v->n, &x)) return col_i64(c, row, x);
            *too_big = 1;
            return 0;
        }
        if (v->type == T_FLOAT) {
            double d = ep_to_double(P, v->p, v->n);
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
            double d = ep_to_double(P, v->p, v->n);
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
            ep_decline(P, "nesting near the depth bound");
            return -1;
        }
        /* the rows before this one are NULL up to here: its text goes after them */
        if (col_pad(args_col, P->rows)) {
            ep_nomem(P);
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
    ep_parse_value(P, a, 1);
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
        if (ep_parse_member_key(P, &k)) return -1;
        size_t kn = 0;
        P->scratch.len = 0;
        const char *kt = key_text(P, &k, &kn);
        if (P->status) return -1;
        int field = kt ? field_of(kt, kn) : F_OTHER;
        ev->nkeys++;
        if (field == F_ARGS) {
            if (args_seen) {
                ep_decline(P, "an event with two args keys");
                return -1;
            }
            args_seen = 1;
            if (read_args(P, ev)) return -1;
        } else {
            ep_parse_value(P, field != F_OTHER ? &ev->f[field] : &ignored, 1);
            if (P->status) return -1;
        }
        int more = ep_after_item(P, '}');
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
            ep_decline(P, "B/E events");
            return -1;
        }
        *is_m = ph->p[0] == 'M';
    } else if (ph->type == T_STRING && ph->esc) {
        ep_decline(P, "an escaped ph");
        return -1;
    }
    for (int i = F_PH; i <= F_S; i++) {
        if (i == F_TS || i == F_DUR) continue;
        if (!text_field_ok(P, &f[i])) return -1;
    }
    for (int i = F_TS; i <= F_DUR; i++) {
        uint8_t t = f[i].type;
        if (!(t == T_ABSENT || t == T_NULL || t == T_INT || t == T_FLOAT)) {
            ep_decline(P, "a ts or dur that is not a number");
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
        int r = ep_time_ns(f[F_TS].p, f[F_TS].n, ts);
        if (r == TIME_DECLINE) {
            ep_decline(P, "a ts with more digits than Decimal keeps");
            return -1;
        }
        if (r == TIME_BAD) *reason = DROP_BAD_TS;
        else if (P->base && ((P->base > 0 && *ts > INT64_MAX - P->base) || (P->base < 0 && *ts < INT64_MIN - P->base)))
            *reason = DROP_BAD_TS;
        else
            *ts += P->base;
    }
    if (has_dur) {
        int r = ep_time_ns(f[F_DUR].p, f[F_DUR].n, dur);
        if (r == TIME_DECLINE) {
            ep_decline(P, "a dur with more digits than Decimal keeps");
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
        ep_decline(P, "an event near the event bound");
        return;
    }
    if (check_event(P, &ev, &is_m)) return;
    if (ev.nkeys == 0) {
        P->last_empty = index;
        if (add_drop(P, DROP_EMPTY_OBJECT, NULL)) ep_nomem(P);
        return;
    }
    if (event_times(P, &ev, is_m, &reason, &ts, &dur)) return;
    if (reason >= 0) {
        if (ev.args_written) P->base_cols[C_ARGS].data.len = ev.args_mark; /* the dropped row's args text goes */
        if (add_drop(P, reason, &ev.f[F_PH])) ep_nomem(P);
        return;
    }
    if (emit_row(P, &ev, index, ts, dur)) {
        ep_nomem(P); /* (a decline said why first, and stays) */
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
        ep_syntax(P);
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
                    ep_decline(P, "nesting near the depth bound");
                    return;
                }
                parse_event(P, index);
            } else {
                Span ignored;
                ep_parse_value(P, &ignored, 0);
                if (!P->status && (size_t)(P->p - s) + 2 >= P->max_event) ep_decline(P, "an entry near the event bound");
                if (!P->status && add_drop(P, DROP_NOT_AN_OBJECT, NULL)) ep_nomem(P);
            }
            if (P->status) return;
            P->entries++;
            int more = ep_after_item(P, ']');
            if (more < 0) return;
            if (!more) break;
        }
    }
    skip_ws(P);
    if (P->p != P->end) {
        ep_syntax(P);
        return;
    }
    for (int i = 0; i < N_BASE; i++)
        if (col_pad(&P->base_cols[i], P->rows)) {
            ep_nomem(P);
            return;
        }
    for (int i = 0; i < P->cfg->n_columns; i++)
        if (P->promoted[i].touched && col_pad(&P->promoted[i], P->rows)) { /* untouched: all NULL, not returned */
            ep_nomem(P);
            return;
        }
}
