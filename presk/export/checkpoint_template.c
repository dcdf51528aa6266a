/* checkpoint.c, written by presk export (presk/export/checkpoint_template.c): the
   parameters of a .psk.d checkpoint (docs/reference.md) read into model.bin's image, each
   converted to the type the realization gives it as presk converts it (docs/export.md).

   header.json is read by a strict scanner for the structure presk writes: the keys
   presk writes and no other, `meta` skipped whatever it holds, every size bounded. The
   payload is streamed: its size and its SHA-256 are checked before any value is used. */
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A parameter: its array in the checkpoint, and where and how model.bin holds it. */
struct param {
  const char *name; /* params/PATH */
  int rank;
  size_t shape[MODEL_PARAM_RANK];
  int type;            /* a model_type: the realized type */
  size_t at;           /* model.bin's offset of its values (integer weights: the integers) */
  size_t scales_at;    /* integer weights: model.bin's offset of their f32 scales */
  int axis;            /* integer weights: the axis each scale's absmax runs along */
  int pow2;            /* integer weights: each scale raised to a power of two */
};

static const struct param params[MODEL_PARAMS + 1] = MODEL_PARAM_TABLE;

/* The dtypes a .psk.d names, with their sizes (0: exact reals, of varying length). */
enum dtype { D_F64, D_F32, D_BF16, D_I64, D_BOOL, D_U16, D_U8, D_I8, D_MPFR, D_COUNT };
static const char *const dtype_names[D_COUNT] = {
    "float64", "float32", "bfloat16", "int64", "bool", "uint16", "uint8", "int8", "mpfr"};
static const size_t dtype_sizes[D_COUNT] = {8, 4, 2, 8, 1, 2, 1, 1, 0};

#define NAME_BYTES 1024     /* the longest array name read */
#define MAX_RANK 32         /* as presk's schema */
#define MAX_DIGITS 20       /* as presk's JSON reader */
#define MPFR_MIN_BYTES 12   /* an exact real's least: its length and 8 bytes */
#define CHUNK 16384        /* the payload is read so many bytes at a time */

typedef unsigned long long u64;

/* ---- messages ---- */

struct reader {
  const char *at, *end; /* header.json's text still to scan */
  int depth;
  char *why;
  size_t why_size;
};

/* Why the checkpoint is refused, written to why[size]; 0. */
static int say(char *why, size_t size, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(why, size, format, args);
  va_end(args);
  return 0;
}

/* The same, while header.json is scanned. */
static int fail(struct reader *r, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(r->why, r->why_size, format, args);
  va_end(args);
  return 0;
}

/* ---- SHA-256 (FIPS 180-4) ---- */

struct sha256 {
  uint32_t h[8];
  uint8_t block[64];
  size_t used;
  u64 bytes;
};

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha_block(struct sha256 *s, const uint8_t *p) {
  uint32_t w[64], v[8], t1, t2;
  int i;
  for (i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
           (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (i = 16; i < 64; i++)
    w[i] = (rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10)) + w[i - 7] +
           (rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3)) + w[i - 16];
  memcpy(v, s->h, sizeof v);
  for (i = 0; i < 64; i++) {
    t1 = v[7] + (rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25)) +
         ((v[4] & v[5]) ^ (~v[4] & v[6])) + sha_k[i] + w[i];
    t2 = (rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22)) +
         ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
    memmove(v + 1, v, 7 * sizeof v[0]);
    v[4] += t1;
    v[0] = t1 + t2;
  }
  for (i = 0; i < 8; i++) s->h[i] += v[i];
}

static void sha_start(struct sha256 *s) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof h0);
  s->used = 0;
  s->bytes = 0;
}

static void sha_add(struct sha256 *s, const uint8_t *p, size_t n) {
  s->bytes += n;
  while (n > 0) {
    size_t take = 64 - s->used < n ? 64 - s->used : n;
    memcpy(s->block + s->used, p, take);
    s->used += take;
    p += take;
    n -= take;
    if (s->used == 64) {
      sha_block(s, s->block);
      s->used = 0;
    }
  }
}

/* The digest as 64 lowercase hexadecimal digits. */
static void sha_hex(struct sha256 *s, char out[65]) {
  uint8_t tail[72] = {0x80};
  u64 bits = s->bytes * 8;
  size_t pad = (s->used < 56 ? 56 : 120) - s->used;
  int i;
  for (i = 0; i < 8; i++) tail[pad + i] = (uint8_t)(bits >> (56 - 8 * i));
  sha_add(s, tail, pad + 8);
  for (i = 0; i < 32; i++)
    sprintf(out + 2 * i, "%02x", (unsigned)(s->h[i / 4] >> (24 - 8 * (i % 4))) & 255);
}

/* ---- header.json ---- */

static void blank(struct reader *r) {
  while (r->at < r->end && (*r->at == ' ' || *r->at == '\t' || *r->at == '\n' || *r->at == '\r'))
    r->at++;
}

static int next_is(struct reader *r, char c) {
  blank(r);
  if (r->at < r->end && *r->at == c) {
    r->at++;
    return 1;
  }
  return 0;
}

static int expect(struct reader *r, char c, const char *where) {
  return next_is(r, c) || fail(r, "header.json: `%c` expected %s", c, where);
}

static int hex4(const char *p, unsigned *v) {
  int i;
  *v = 0;
  for (i = 0; i < 4; i++) {
    char c = p[i];
    unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                 : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                 : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                        : 16;
    if (d == 16) return 0;
    *v = *v * 16 + d;
  }
  return 1;
}

/* A string, decoded to UTF-8 into out[cap] (NUL-terminated), or checked and skipped when
   out is NULL. */
static int string(struct reader *r, char *out, size_t cap) {
  size_t n = 0;
  if (!expect(r, '"', "(a string)")) return 0;
  while (r->at < r->end && *r->at != '"') {
    unsigned char c = (unsigned char)*r->at++;
    char bytes[4];
    size_t k = 1;
    bytes[0] = (char)c;
    if (c < 0x20) return fail(r, "header.json: a control character in a string");
    if (c == '\\') {
      unsigned u, low;
      if (r->at >= r->end) break;
      c = (unsigned char)*r->at++;
      switch (c) {
        case '"': case '\\': case '/': bytes[0] = (char)c; break;
        case 'b': bytes[0] = '\b'; break;
        case 'f': bytes[0] = '\f'; break;
        case 'n': bytes[0] = '\n'; break;
        case 'r': bytes[0] = '\r'; break;
        case 't': bytes[0] = '\t'; break;
        case 'u':
          if (r->end - r->at < 4 || !hex4(r->at, &u))
            return fail(r, "header.json: a bad \\u escape");
          r->at += 4;
          if (u >= 0xd800 && u < 0xdc00) { /* a surrogate pair */
            if (r->end - r->at < 6 || r->at[0] != '\\' || r->at[1] != 'u' ||
                !hex4(r->at + 2, &low) || low < 0xdc00 || low >= 0xe000)
              return fail(r, "header.json: a lone surrogate in a \\u escape");
            r->at += 6;
            u = 0x10000 + ((u - 0xd800) << 10) + (low - 0xdc00);
          } else if (u >= 0xdc00 && u < 0xe000) {
            return fail(r, "header.json: a lone surrogate in a \\u escape");
          }
          if (u < 0x80) {
            bytes[0] = (char)u;
          } else if (u < 0x800) {
            bytes[0] = (char)(0xc0 | u >> 6), bytes[1] = (char)(0x80 | (u & 63)), k = 2;
          } else if (u < 0x10000) {
            bytes[0] = (char)(0xe0 | u >> 12), bytes[1] = (char)(0x80 | (u >> 6 & 63));
            bytes[2] = (char)(0x80 | (u & 63)), k = 3;
          } else {
            bytes[0] = (char)(0xf0 | u >> 18), bytes[1] = (char)(0x80 | (u >> 12 & 63));
            bytes[2] = (char)(0x80 | (u >> 6 & 63)), bytes[3] = (char)(0x80 | (u & 63)), k = 4;
          }
          break;
        default: return fail(r, "header.json: a bad escape `\\%c`", c);
      }
    }
    if (out != NULL) {
      if (n + k >= cap)
        return fail(r, "header.json: a string over %lu bytes", (unsigned long)cap - 1);
      memcpy(out + n, bytes, k);
    }
    n += k;
  }
  if (!next_is(r, '"')) return fail(r, "header.json: a string without its end");
  if (out != NULL) out[n] = '\0';
  return 1;
}

/* A whole number from 0 to 2^64 - 1, written as JSON integers are (no fraction, no
   exponent, no leading zero). */
static int whole(struct reader *r, u64 *v, const char *what) {
  int digits = 0;
  blank(r);
  *v = 0;
  while (r->at < r->end && *r->at >= '0' && *r->at <= '9') {
    unsigned d = (unsigned)(*r->at++ - '0');
    if (++digits > MAX_DIGITS || *v > (~0ULL - d) / 10)
      return fail(r, "header.json: %s is too large", what);
    *v = *v * 10 + d;
  }
  if (digits == 0 || (digits > 1 && r->at[-digits] == '0') ||
      (r->at < r->end && (*r->at == '.' || *r->at == 'e' || *r->at == 'E')))
    return fail(r, "header.json: %s is not a whole number", what);
  return 1;
}

static int nest(struct reader *r) {
  return ++r->depth <= MODEL_HEADER_DEPTH ||
         fail(r, "header.json: nested deeper than %d levels", MODEL_HEADER_DEPTH);
}

/* Any JSON value, checked and skipped (what `meta` holds). */
static int skip(struct reader *r) {
  blank(r);
  if (r->at >= r->end) return fail(r, "header.json: a value expected");
  if (*r->at == '"') return string(r, NULL, 0);
  if (*r->at == '{' || *r->at == '[') {
    char close = *r->at == '{' ? '}' : ']';
    r->at++;
    if (!nest(r)) return 0;
    if (!next_is(r, close)) {
      do {
        if (close == '}' && !(string(r, NULL, 0) && expect(r, ':', "after a key"))) return 0;
        if (!skip(r)) return 0;
      } while (next_is(r, ','));
      if (!expect(r, close, "to close an object or array")) return 0;
    }
    r->depth--;
    return 1;
  }
  {
    static const char *const words[3] = {"true", "false", "null"};
    int i;
    for (i = 0; i < 3; i++) {
      size_t n = strlen(words[i]);
      if ((size_t)(r->end - r->at) >= n && memcmp(r->at, words[i], n) == 0) {
        r->at += n;
        return 1;
      }
    }
  }
  { /* a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
    const char *start;
    if (r->at < r->end && *r->at == '-') r->at++;
    start = r->at;
    while (r->at < r->end && *r->at >= '0' && *r->at <= '9') r->at++;
    if (r->at == start || (r->at - start > 1 && *start == '0')) goto bad;
    if (r->at < r->end && *r->at == '.') {
      start = ++r->at;
      while (r->at < r->end && *r->at >= '0' && *r->at <= '9') r->at++;
      if (r->at == start) goto bad;
    }
    if (r->at < r->end && (*r->at == 'e' || *r->at == 'E')) {
      r->at++;
      if (r->at < r->end && (*r->at == '+' || *r->at == '-')) r->at++;
      start = r->at;
      while (r->at < r->end && *r->at >= '0' && *r->at <= '9') r->at++;
      if (r->at == start) goto bad;
    }
    return 1;
  }
bad:
  return fail(r, "header.json: not JSON (a bad value)");
}

/* An object of known keys: `member` reads each key's value, given the key's index in
   keys[] (an unknown or repeated key is refused); every key is required. */
typedef int (*member_fn)(struct reader *r, int key, void *into);

static int object(struct reader *r, const char *const keys[], int count, member_fn member,
                  void *into, const char *what) {
  unsigned seen = 0;
  char key[32];
  int k;
  if (!expect(r, '{', what) || !nest(r)) return 0;
  if (!next_is(r, '}')) {
    do {
      if (!string(r, key, sizeof key)) return 0;
      for (k = 0; k < count && strcmp(key, keys[k]) != 0; k++) continue;
      if (k == count) return fail(r, "header.json: %s has an unknown key `%s`", what, key);
      if (seen & 1u << k) return fail(r, "header.json: %s has `%s` twice", what, key);
      seen |= 1u << k;
      if (!expect(r, ':', "after a key") || !member(r, k, into)) return 0;
    } while (next_is(r, ','));
    if (!expect(r, '}', "to close an object")) return 0;
  }
  for (k = 0; k < count; k++)
    if (!(seen & 1u << k)) return fail(r, "header.json: %s has no `%s`", what, keys[k]);
  r->depth--;
  return 1;
}

/* An array of the header, as its entry gives it. */
struct entry {
  char name[NAME_BYTES];
  int dtype, rank;
  u64 shape[MAX_RANK], offset, nbytes;
};

static const char *const entry_keys[5] = {"name", "dtype", "shape", "offset", "nbytes"};

static int entry_member(struct reader *r, int key, void *into) {
  struct entry *e = into;
  char dtype[16];
  switch (key) {
    case 0:
      if (!string(r, e->name, sizeof e->name)) return 0;
      return e->name[0] != '\0' || fail(r, "header.json: an array without a name");
    case 1:
      if (!string(r, dtype, sizeof dtype)) return fail(r, "header.json: an unknown dtype");
      for (e->dtype = 0; e->dtype < D_COUNT; e->dtype++)
        if (strcmp(dtype, dtype_names[e->dtype]) == 0) return 1;
      return fail(r, "header.json: array %s has the unknown dtype `%s`", e->name, dtype);
    case 2:
      if (!expect(r, '[', "(a shape)")) return 0;
      e->rank = 0;
      if (next_is(r, ']')) return 1;
      do {
        if (e->rank == MAX_RANK) return fail(r, "header.json: a shape of over %d axes", MAX_RANK);
        if (!whole(r, &e->shape[e->rank++], "an extent")) return 0;
      } while (next_is(r, ','));
      return expect(r, ']', "to close a shape");
    case 3: return whole(r, &e->offset, "an offset");
    default: return whole(r, &e->nbytes, "a size");
  }
}

struct payload {
  u64 nbytes;
  char sha256[80];
};

static const char *const payload_keys[3] = {"file", "nbytes", "sha256"};

static int payload_member(struct reader *r, int key, void *into) {
  struct payload *p = into;
  char file[16];
  size_t i;
  switch (key) {
    case 0:
      if (!string(r, file, sizeof file) || strcmp(file, "payload.bin") != 0)
        return fail(r, "header.json: the payload's file is not payload.bin");
      return 1;
    case 1: return whole(r, &p->nbytes, "the payload's size");
    default:
      if (!string(r, p->sha256, sizeof p->sha256)) return 0;
      for (i = 0; p->sha256[i] != '\0'; i++) {
        char c = p->sha256[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) break;
      }
      return (i == 64 && p->sha256[i] == '\0') ||
             fail(r, "header.json: the payload's sha256 is not 64 hexadecimal digits");
  }
}

/* What the header says of the model's parameters, and of the payload. */
struct found {
  int dtype;      /* of params[i], or -1 before its entry is read */
  u64 offset, nbytes;
};

struct header {
  struct found found[MODEL_PARAMS + 1];
  u64 end; /* where the arrays read so far end */
  struct payload payload;
};

static void shape_text(char *out, size_t size, int rank, const u64 *u, const size_t *s) {
  size_t n = 0;
  int i;
  out[n++] = '[';
  for (i = 0; i < rank && n + 24 < size; i++)
    n += (size_t)sprintf(out + n, i ? ", %llu" : "%llu", u ? u[i] : (u64)s[i]);
  snprintf(out + n, size - n, "]");
}

/* An array entry: laid out where the one before ends, its bytes those of its shape; a
   parameter's matching the model's path, shape and a dtype it converts from. */
static int array(struct reader *r, struct header *h) {
  struct entry e;
  u64 count = 1;
  int i, k;
  char have[400], want[400];
  if (!object(r, entry_keys, 5, entry_member, &e, "an array")) return 0;
  for (k = 0; k < e.rank; k++) {
    if (e.shape[k] != 0 && count > ~0ULL / e.shape[k])
      return fail(r, "header.json: array %s has too many elements", e.name);
    count *= e.shape[k];
  }
  if (e.offset != h->end)
    return fail(r, "header.json: array %s starts at byte %llu, not %llu", e.name, e.offset, h->end);
  if (e.dtype == D_MPFR ? count > e.nbytes / MPFR_MIN_BYTES
                        : count > ~0ULL / 8 || e.nbytes != count * dtype_sizes[e.dtype])
    return fail(r, "header.json: array %s has %llu bytes for its shape", e.name, e.nbytes);
  if (e.nbytes > ~0ULL - h->end) return fail(r, "header.json: the arrays are too large");
  h->end += e.nbytes;
  if (strncmp(e.name, "params/", 7) != 0) return 1; /* an optimiser's moments, say */
  for (i = 0; i < MODEL_PARAMS && strcmp(e.name, params[i].name) != 0; i++) continue;
  if (i == MODEL_PARAMS)
    return fail(r, "has parameter %s, which this program lacks", e.name + 7);
  if (h->found[i].dtype >= 0) return fail(r, "header.json: array %s appears twice", e.name);
  shape_text(have, sizeof have, e.rank, e.shape, NULL);
  shape_text(want, sizeof want, params[i].rank, NULL, params[i].shape);
  if (strcmp(have, want) != 0)
    return fail(r, "parameter %s has shape %s, the program's is %s", e.name + 7, have, want);
  if (params[i].type == MODEL_I64 ? e.dtype != D_I64 : e.dtype > D_BF16)
    return fail(r, "parameter %s is stored as %s; %s", e.name + 7, dtype_names[e.dtype],
                params[i].type == MODEL_I64 ? "the program's is int64"
                : e.dtype == D_MPFR ? "exact reals (a reference run's) are not read here: "
                                      "the C program reads float64, float32 and bfloat16"
                                    : "a real is read from float64, float32 or bfloat16");
  h->found[i].dtype = e.dtype;
  h->found[i].offset = e.offset;
  h->found[i].nbytes = e.nbytes;
  return 1;
}

static const char *const header_keys[6] = {"format", "version", "kind",
                                           "meta",   "arrays",  "payload"};

static int header_member(struct reader *r, int key, void *into) {
  struct header *h = into;
  char text[32];
  u64 version;
  switch (key) {
    case 0:
      if (!string(r, text, sizeof text) || strcmp(text, "presk.psk.d") != 0)
        return fail(r, "header.json: not of the format presk.psk.d");
      return 1;
    case 1:
      if (!whole(r, &version, "the version")) return 0;
      return version == 1 || fail(r, "header.json: version %llu (this program reads 1)", version);
    case 2:
      if (!string(r, text, sizeof text)) return 0;
      return strcmp(text, "checkpoint") == 0 || fail(r, "a %s file, not a checkpoint", text);
    case 3:
      blank(r);
      if (r->at >= r->end || *r->at != '{') return fail(r, "header.json: meta is not an object");
      return skip(r);
    case 4:
      if (!expect(r, '[', "(the arrays)") || !nest(r)) return 0;
      if (!next_is(r, ']')) {
        do
          if (!array(r, h)) return 0;
        while (next_is(r, ','));
        if (!expect(r, ']', "to close the arrays")) return 0;
      }
      r->depth--;
      return 1;
    default: return object(r, payload_keys, 3, payload_member, &h->payload, "the payload");
  }
}

/* ---- files ---- */

static FILE *open_in(const char *dir, const char *file, char *why, size_t size) {
  char path[4096];
  FILE *f;
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >= sizeof path) {
    say(why, size, "a path over %lu bytes", (unsigned long)sizeof path - 1);
    return NULL;
  }
  f = fopen(path, "rb");
  if (f == NULL) say(why, size, "not a .psk.d checkpoint: cannot open its %s", file);
  return f;
}

/* header.json read whole (at most MODEL_HEADER_BYTES) and scanned. */
static int read_header(const char *dir, struct header *h, char *why, size_t size) {
  struct reader r;
  FILE *f = open_in(dir, "header.json", why, size);
  char *text;
  size_t got;
  int i, ok;
  if (f == NULL) return 0;
  text = malloc((size_t)MODEL_HEADER_BYTES + 1);
  got = text == NULL ? 0 : fread(text, 1, (size_t)MODEL_HEADER_BYTES + 1, f);
  ok = text != NULL && !ferror(f);
  fclose(f);
  r.at = text;
  r.end = text + got;
  r.depth = 0;
  r.why = why;
  r.why_size = size;
  h->end = 0;
  for (i = 0; i <= MODEL_PARAMS; i++) h->found[i].dtype = -1;
  if (!ok)
    ok = fail(&r, "header.json is not readable");
  else if (got > (size_t)MODEL_HEADER_BYTES)
    ok = fail(&r, "header.json has over %lu bytes", (unsigned long)MODEL_HEADER_BYTES);
  else
    ok = object(&r, header_keys, 6, header_member, h, "the header") &&
         (blank(&r), r.at == r.end || fail(&r, "header.json: text after the header"));
  if (ok && h->end != h->payload.nbytes)
    ok = fail(&r, "header.json: the arrays take %llu bytes, the payload %llu", h->end,
              h->payload.nbytes);
  for (i = 0; ok && i < MODEL_PARAMS; i++)
    if (h->found[i].dtype < 0)
      ok = fail(&r, "has no parameter %s of this program", params[i].name + 7);
  free(text);
  return ok;
}

/* payload.bin streamed: the parameters' bytes kept (raw[i]), its size and digest checked. */
static int read_payload(const char *dir, const struct header *h, uint8_t *raw[], char *why,
                        size_t size) {
  uint8_t chunk[CHUNK];
  struct sha256 sha;
  char digest[65];
  u64 at = 0;
  size_t got;
  int i, ok = 1;
  FILE *f = open_in(dir, "payload.bin", why, size);
  if (f == NULL) return 0;
  sha_start(&sha);
  while (ok && (got = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (got > h->payload.nbytes - at) {
      ok = say(why, size, "corrupt: the payload has over %llu bytes", h->payload.nbytes);
      break;
    }
    sha_add(&sha, chunk, got);
    for (i = 0; i < MODEL_PARAMS; i++) { /* the part of each parameter in this chunk */
      u64 from = h->found[i].offset > at ? h->found[i].offset : at;
      u64 to = h->found[i].offset + h->found[i].nbytes;
      if (to > at + got) to = at + got;
      if (from < to) memcpy(raw[i] + (from - h->found[i].offset), chunk + (from - at), to - from);
    }
    at += got;
  }
  if (ok && ferror(f)) ok = say(why, size, "payload.bin is not readable");
  fclose(f);
  if (ok && at < h->payload.nbytes)
    ok = say(why, size, "truncated: the payload has %llu of its %llu bytes", at, h->payload.nbytes);
  if (ok) sha_hex(&sha, digest);
  if (ok && strcmp(digest, h->payload.sha256) != 0)
    ok = say(why, size, "corrupt: the payload does not match its checksum");
  return ok;
}

/* ---- conversions ---- */

/* Element i of a stored real array, widened to double (exact). */
static double real_at(const uint8_t *raw, int dtype, size_t i) {
  double d;
  float x;
  uint32_t bits;
  uint16_t half;
  if (dtype == D_F64) {
    memcpy(&d, raw + 8 * i, 8);
    return d;
  }
  if (dtype == D_F32) {
    memcpy(&x, raw + 4 * i, 4);
    return x;
  }
  memcpy(&half, raw + 2 * i, 2);
  bits = (uint32_t)half << 16;
  memcpy(&x, &bits, 4);
  return x;
}

/* A float rounded to bfloat16 to nearest, ties to even, as ml_dtypes rounds (a NaN to
   the quiet NaN of its sign). */
static uint16_t bf16_of(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16 & 0x8000u) | 0x7fc0u);
  return (uint16_t)((b + 0x7fffu + (b >> 16 & 1u)) >> 16);
}

/* Integer weights as presk/quantize.py makes them: per index of every axis but `axis`, the
   scale s = f32(max|w| / top) (pow2: the power of two at or above it), each integer
   rint(w / s) (ties to even) within [-top, top]; at 4 bits two to a byte along the last
   axis, the even element in the low nibble. */
static int quantize(const struct param *p, const uint8_t *raw, int dtype, size_t count,
                    uint8_t *data, char *why, size_t size) {
  int top = p->type == MODEL_INT8 ? 127 : 7, k;
  size_t outer = 1, inner = 1, along = p->shape[p->axis], o, i, j, last = p->shape[p->rank - 1];
  int8_t *ints = p->type == MODEL_INT8 ? (int8_t *)(data + p->at) : malloc(count + 1);
  for (k = 0; k < p->axis; k++) outer *= p->shape[k];
  for (k = p->axis + 1; k < p->rank; k++) inner *= p->shape[k];
  if (ints == NULL) return say(why, size, "out of memory");
  for (o = 0; o < outer; o++)
    for (i = 0; i < inner; i++) {
      double peak = 0;
      float s;
      for (j = 0; j < along; j++) {
        double a = fabs(real_at(raw, dtype, (o * along + j) * inner + i));
        if (a > peak) peak = a;
      }
      s = (float)(peak / top);
      if (p->pow2 && s > 0 && isfinite(s)) { /* 2^ceil(log2 s), exactly */
        int e;
        double m = frexp(s, &e);
        s = (float)ldexp(1.0, m == 0.5 ? e - 1 : e);
      }
      memcpy(data + p->scales_at + 4 * (o * inner + i), &s, 4);
      for (j = 0; j < along; j++) {
        size_t at = (o * along + j) * inner + i;
        double q = s > 0 ? rint(real_at(raw, dtype, at) / (double)s) : 0;
        ints[at] = (int8_t)(q > top ? top : q < -top ? -top : q);
      }
    }
  if (p->type == MODEL_INT4) { /* packed along the last axis */
    size_t row, width = (last + 1) / 2;
    for (row = 0; last > 0 && row < count / last; row++)
      for (j = 0; j < width; j++) {
        unsigned low = (unsigned)ints[row * last + 2 * j] & 15u;
        unsigned high = 2 * j + 1 < last ? (unsigned)ints[row * last + 2 * j + 1] & 15u : 0;
        data[p->at + row * width + j] = (uint8_t)(low | high << 4);
      }
    free(ints);
  }
  return 1;
}

/* Whether the values of a parameter are ones C converts as presk does: every one finite
   for integer weights (what numpy makes of a NaN there, C does not reproduce). */
static int convertible(const struct param *p, const uint8_t *raw, const struct found *f,
                       char *why, size_t size) {
  size_t count = 1, i;
  int k;
  if (p->type != MODEL_INT8 && p->type != MODEL_INT4) return 1;
  for (k = 0; k < p->rank; k++) count *= p->shape[k];
  for (i = 0; i < count; i++)
    if (!isfinite(real_at(raw, f->dtype, i)))
      return say(why, size, "parameter %s holds a value that is not finite: integer weights "
                 "are made from finite reals", p->name + 7);
  return 1;
}

/* A parameter's stored values in its realized type, at its place in model.bin's image. */
static int convert(const struct param *p, const uint8_t *raw, const struct found *f,
                   uint8_t *data, char *why, size_t size) {
  size_t count = 1, i;
  int k;
  for (k = 0; k < p->rank; k++) count *= p->shape[k];
  if (p->type == MODEL_INT8 || p->type == MODEL_INT4)
    return quantize(p, raw, f->dtype, count, data, why, size);
  if ((p->type == MODEL_F64 && f->dtype == D_F64) || (p->type == MODEL_F32 && f->dtype == D_F32) ||
      (p->type == MODEL_BF16 && f->dtype == D_BF16) || p->type == MODEL_I64) {
    memcpy(data + p->at, raw, f->nbytes); /* its own type: as it is */
    return 1;
  }
  for (i = 0; i < count; i++) {
    double d = real_at(raw, f->dtype, i);
    float x = (float)d; /* to nearest, ties to even; exact from bfloat16 */
    uint16_t b = bf16_of(x);
    if (p->type == MODEL_F64)
      memcpy(data + p->at + 8 * i, &d, 8);
    else if (p->type == MODEL_F32)
      memcpy(data + p->at + 4 * i, &x, 4);
    else
      memcpy(data + p->at + 2 * i, &b, 2); /* reals reach bfloat16 through float32 */
  }
  return 1;
}

/* 0, the parameters of model.bin's image `data` replaced by the checkpoint's; or -1, why
   written to why[size], `data` unchanged (but when memory runs out while quantising). */
int presk_read_checkpoint(const char *dir, uint8_t *data, char *why, size_t size) {
  struct header h;
  uint8_t *raw[MODEL_PARAMS + 1] = {NULL};
  int i, ok;
  if (MODEL_PARAMS == 0) return say(why, size, "the entry has no parameters to load") - 1;
  if (!read_header(dir, &h, why, size)) return -1;
  for (i = 0, ok = 1; ok && i < MODEL_PARAMS; i++)
    if ((raw[i] = malloc(h.found[i].nbytes + 1)) == NULL) ok = say(why, size, "out of memory");
  ok = ok && read_payload(dir, &h, raw, why, size);
  for (i = 0; ok && i < MODEL_PARAMS; i++)
    ok = convertible(&params[i], raw[i], &h.found[i], why, size);
  for (i = 0; ok && i < MODEL_PARAMS; i++)
    ok = convert(&params[i], raw[i], &h.found[i], data, why, size);
  for (i = 0; i < MODEL_PARAMS; i++) free(raw[i]);
  return ok ? 0 : -1;
}
