#include "semihost.h"

void sh_print(const char *text)
{
    semihost_call(SH_SYS_WRITE0, text);
}

int32_t sh_open(const char *name, uint32_t length, uint32_t mode)
{
    uint32_t block[3];
    block[0] = (uint32_t)(uintptr_t)name;
    block[1] = mode;
    block[2] = length;
    return semihost_call(SH_SYS_OPEN, block);
}

uint32_t sh_read(int32_t handle, void *buffer, uint32_t length)
{
    uint32_t block[3];
    block[0] = (uint32_t)handle;
    block[1] = (uint32_t)(uintptr_t)buffer;
    block[2] = length;
    return (uint32_t)semihost_call(SH_SYS_READ, block);
}

uint32_t sh_write(int32_t handle, const void *buffer, uint32_t length)
{
    uint32_t block[3];
    block[0] = (uint32_t)handle;
    block[1] = (uint32_t)(uintptr_t)buffer;
    block[2] = length;
    return (uint32_t)semihost_call(SH_SYS_WRITE, block);
}

void sh_close(int32_t handle)
{
    uint32_t block[1];
    block[0] = (uint32_t)handle;
    semihost_call(SH_SYS_CLOSE, block);
}

void sh_exit(uint32_t reason)
{
    /* On 32-bit Arm SYS_EXIT takes the reason itself in r1, not a pointer to a block. */
    semihost_call(SH_SYS_EXIT, (const void *)(uintptr_t)reason);
    for (;;) {
    }
}
