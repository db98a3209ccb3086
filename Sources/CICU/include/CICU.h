#ifndef SETTEE_CICU_H
#define SETTEE_CICU_H

#include <stdint.h>

/// A Unicode Collation Algorithm collator (ICU's root locale, tertiary strength: CouchDB's view collation).
/// One collator must not be used by two threads at once.
typedef struct settee_collator settee_collator;

/// Opens a root-locale collator; NULL when ICU cannot open one.
settee_collator *settee_collator_open(void);
void settee_collator_close(settee_collator *collator);

/// Writes the sort key of a UTF-8 string into `out` (at most `capacity` bytes) and returns its length, including
/// the trailing 0 byte (the key holds no other 0 byte); a result larger than `capacity` means nothing usable was
/// written and the call must be repeated with a larger buffer. Returns -1 for invalid UTF-8.
int32_t settee_collator_sort_key(settee_collator *collator, const char *utf8, int32_t length,
                                 uint8_t *out, int32_t capacity);

/// Compares two UTF-8 strings: negative, zero or positive.
int32_t settee_collator_compare(settee_collator *collator, const char *a, int32_t a_length,
                                const char *b, int32_t b_length);

/// Writes the collator's version (ICU's collation data version, e.g. "153.120") into `out` and returns its length;
/// -1 when it doesn't fit.
int32_t settee_collator_version(settee_collator *collator, char *out, int32_t capacity);

#endif
