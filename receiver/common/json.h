/* json.h: the one strict JSON reader for text that arrives from outside
 * (provider callbacks, the order API, replayed exports). */
#ifndef IDEMHOOK_JSON_H
#define IDEMHOOK_JSON_H

#include <stddef.h>

struct cJSON;

#define JSON_DEPTH_MAX 32 /* nesting levels of arrays and objects, the outermost is 1 */

/* Parses data[0..len) as exactly one JSON value (RFC 8259) into a cJSON tree
 * the caller frees with cJSON_Delete. Where parsers are known to disagree it
 * refuses instead of choosing: a key repeated in one object (at any depth, compared
 * after unescaping), anything but whitespace after the value (a second
 * concatenated value included), NUL in a key or string (\u0000), bytes that are
 * not UTF-8 and unpaired surrogate escapes, raw control characters in strings,
 * a number a double cannot hold, a byte order mark, and nesting past
 * JSON_DEPTH_MAX. Returns NULL when data is not such a text (or on allocation
 * failure); ret_why (may be NULL) then gets a static phrase saying why. */
struct cJSON *json_parse_strict(const void *data, size_t len, const char **ret_why);

#endif
