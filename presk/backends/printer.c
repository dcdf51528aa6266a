/* MLIR ops printed through MLIR's C API with a callback in C (presk/backends/printer.py).

   The Python bindings print through the same C API, but its stream is unbuffered and
   each piece of text it writes is a call back into Python; here the pieces are copied
   into one growing buffer. The flags are those of native.py's `_asm`: each op printed
   alone (its values numbered locally), not verified again. */
#include <stdlib.h>
#include <string.h>

typedef struct { void *ptr; } MlirOperation;
typedef struct { void *ptr; } MlirOpPrintingFlags;
typedef struct { const char *data; size_t length; } MlirStringRef;
typedef void (*MlirStringCallback)(MlirStringRef, void *);

MlirOpPrintingFlags mlirOpPrintingFlagsCreate(void);
void mlirOpPrintingFlagsDestroy(MlirOpPrintingFlags);
void mlirOpPrintingFlagsUseLocalScope(MlirOpPrintingFlags);
void mlirOpPrintingFlagsAssumeVerified(MlirOpPrintingFlags);
void mlirOperationPrintWithFlags(MlirOperation, MlirOpPrintingFlags, MlirStringCallback,
                                 void *);

typedef struct {
  char *data;
  size_t size, capacity;
  int failed; /* out of memory: the text is dropped */
} Text;

static void append(MlirStringRef piece, void *user) {
  Text *t = user;
  if (t->failed) return;
  if (t->size + piece.length > t->capacity) {
    size_t capacity = t->capacity ? t->capacity : 1 << 16;
    while (capacity < t->size + piece.length) capacity *= 2;
    char *grown = realloc(t->data, capacity);
    if (!grown) {
      t->failed = 1;
      return;
    }
    t->data = grown;
    t->capacity = capacity;
  }
  memcpy(t->data + t->size, piece.data, piece.length);
  t->size += piece.length;
}

/* `ops[0..n)` printed one after another, each followed by a newline, into `*out` (to be
   given back to presk_print_free); its length, or -1 if memory ran out. */
long presk_print_ops(void *const *ops, size_t n, char **out) {
  Text t = {0};
  MlirOpPrintingFlags flags = mlirOpPrintingFlagsCreate();
  mlirOpPrintingFlagsUseLocalScope(flags);
  mlirOpPrintingFlagsAssumeVerified(flags);
  MlirStringRef newline = {"\n", 1};
  for (size_t i = 0; i < n; i++) {
    MlirOperation op = {ops[i]};
    mlirOperationPrintWithFlags(op, flags, append, &t);
    append(newline, &t);
  }
  mlirOpPrintingFlagsDestroy(flags);
  if (t.failed) {
    free(t.data);
    return -1;
  }
  *out = t.data;
  return (long)t.size;
}

void presk_print_free(char *text) { free(text); }
