/*
 * mallocTrim(): glibc's malloc_trim(0), as a Node-API addon (Node has no binding of its own).
 * free() gives memory back to the system only from the top of an arena; malloc_trim also
 * releases the free pages in the middle of every arena (madvise MADV_DONTNEED), which a burst
 * of short-lived buffers leaves behind. Returns whether memory was released; undefined where the
 * C library is not glibc.
 */
#include <node_api.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

static napi_value Trim(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
#if defined(__GLIBC__)
  napi_get_boolean(env, malloc_trim(0) != 0, &result);
#else
  napi_get_undefined(env, &result);
#endif
  return result;
}

NAPI_MODULE_INIT() {
  napi_value trim;
  if (napi_create_function(env, "mallocTrim", NAPI_AUTO_LENGTH, Trim, NULL, &trim) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "mallocTrim", trim) != napi_ok) return NULL;
  return exports;
}
