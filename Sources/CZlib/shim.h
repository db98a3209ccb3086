#include <zlib.h>

// deflateInit2/inflateInit2 are macros Swift cannot import; expose them as functions.
static inline int czlib_deflate_init_gzip(z_stream *stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
}
static inline int czlib_inflate_init_gzip(z_stream *stream) {
    // 15 + 32: zlib or gzip header, detected.
    return inflateInit2(stream, 15 + 32);
}

// Raw deflate (no zlib or gzip wrapper), as BLIP compresses its frames.
static inline int czlib_deflate_init_raw(z_stream *stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
}
static inline int czlib_inflate_init_raw(z_stream *stream) {
    return inflateInit2(stream, -15);
}
