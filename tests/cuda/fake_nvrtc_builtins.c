/* The fake NVRTC's builtins library (libnvrtc-builtins.so.99.1): only its presence matters. */
__attribute__((visibility("default"))) int fake_nvrtc_builtins_present(void) { return 1; }
