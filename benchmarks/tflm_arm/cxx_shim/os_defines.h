// Shim: libstdc++ os_defines for a bare-metal newlib target (the host's Linux one needs glibc).
#ifndef _GLIBCXX_OS_DEFINES
#define _GLIBCXX_OS_DEFINES 1
#define __NO_STRING_INLINES
#endif
