#include "CICU.h"

#include <stdlib.h>
#include <string.h>

// The few ICU functions used here, declared rather than included: neither ICU Apple ships nor the one Swift's
// Foundation bundles installs its headers where a C target finds them.
#if !defined(__APPLE__)
// Linux: the ICU that Swift's Foundation bundles (`lib_FoundationICU` in the toolchain, linked into a
// --static-swift-stdlib binary, which carries it anyway). Its entry points have a `swift_` prefix, so that it
// never clashes with a system ICU in the same process. Using it, the node needs no system ICU (libicu: 36 MB in a
// container image) and every build collates with the same ICU version whatever the distribution ships.
#define ucol_open swift_ucol_open
#define ucol_close swift_ucol_close
#define ucol_getSortKey swift_ucol_getSortKey
#define ucol_strcollUTF8 swift_ucol_strcollUTF8
#define ucol_getVersion swift_ucol_getVersion
#define u_versionToString swift_u_versionToString
#define u_strFromUTF8 swift_u_strFromUTF8
#endif
// Apple platforms: the system library libicucore, whose entry points have no version suffix.
typedef uint16_t UChar;
typedef int UErrorCode;
#define U_ZERO_ERROR 0
#define U_FAILURE(x) ((x) > U_ZERO_ERROR)
typedef struct UCollator UCollator;
typedef enum { UCOL_EQUAL = 0, UCOL_GREATER = 1, UCOL_LESS = -1 } UCollationResult;
typedef uint8_t UVersionInfo[4];
#define U_MAX_VERSION_STRING_LENGTH 20
UCollator *ucol_open(const char *loc, UErrorCode *status);
void ucol_close(UCollator *coll);
int32_t ucol_getSortKey(const UCollator *coll, const UChar *source, int32_t sourceLength, uint8_t *result,
                        int32_t resultLength);
UCollationResult ucol_strcollUTF8(const UCollator *coll, const char *source, int32_t sourceLength,
                                  const char *target, int32_t targetLength, UErrorCode *status);
void ucol_getVersion(const UCollator *coll, UVersionInfo info);
void u_versionToString(const UVersionInfo versionArray, char *versionString);
UChar *u_strFromUTF8(UChar *dest, int32_t destCapacity, int32_t *pDestLength, const char *src, int32_t srcLength,
                     UErrorCode *pErrorCode);

struct settee_collator {
    UCollator *ucol;
    UChar *buffer;       // UTF-16 scratch for sort keys
    int32_t capacity;    // in UChars
};

settee_collator *settee_collator_open(void) {
    UErrorCode status = U_ZERO_ERROR;
    UCollator *ucol = ucol_open("", &status);
    if (U_FAILURE(status) || ucol == NULL) return NULL;
    settee_collator *c = calloc(1, sizeof(settee_collator));
    if (c == NULL) { ucol_close(ucol); return NULL; }
    c->ucol = ucol;
    return c;
}

void settee_collator_close(settee_collator *c) {
    if (c == NULL) return;
    ucol_close(c->ucol);
    free(c->buffer);
    free(c);
}

int32_t settee_collator_sort_key(settee_collator *c, const char *utf8, int32_t length, uint8_t *out, int32_t capacity) {
    // UTF-8 → UTF-16 needs at most one UChar per byte.
    if (length + 1 > c->capacity) {
        int32_t size = length + 1 < 256 ? 256 : length + 1;
        UChar *grown = realloc(c->buffer, sizeof(UChar) * (size_t)size);
        if (grown == NULL) return -1;
        c->buffer = grown;
        c->capacity = size;
    }
    int32_t units = 0;
    UErrorCode status = U_ZERO_ERROR;
    u_strFromUTF8(c->buffer, c->capacity, &units, utf8, length, &status);
    if (U_FAILURE(status)) return -1;
    return ucol_getSortKey(c->ucol, c->buffer, units, out, capacity);
}

int32_t settee_collator_compare(settee_collator *c, const char *a, int32_t a_length, const char *b, int32_t b_length) {
    UErrorCode status = U_ZERO_ERROR;
    UCollationResult r = ucol_strcollUTF8(c->ucol, a, a_length, b, b_length, &status);
    if (U_FAILURE(status)) return 0;
    return r == UCOL_LESS ? -1 : (r == UCOL_GREATER ? 1 : 0);
}

int32_t settee_collator_version(settee_collator *collator, char *out, int32_t capacity) {
    UVersionInfo version;
    ucol_getVersion(collator->ucol, version);
    char text[U_MAX_VERSION_STRING_LENGTH];
    u_versionToString(version, text);
    int32_t n = (int32_t)strlen(text);
    if (n >= capacity) return -1;
    memcpy(out, text, (size_t)n + 1);
    return n;
}
