/* What every reset handler does before main: copy .data from flash, zero .bss, and enable the FPU where the core
 * has one. Shared by the test firmware's startup.c and the tests' emulation harness (devtools/mcu/startup.c). */
#ifndef TINYNAS_MEMORY_INIT_H
#define TINYNAS_MEMORY_INIT_H

#include <stdint.h>

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];

static inline void init_memory(void)
{
    uint32_t *src = __data_load;
    uint32_t *dst;
    for (dst = __data_start; dst < __data_end; ++dst, ++src) {
        *dst = *src;
    }
    for (dst = __bss_start; dst < __bss_end; ++dst) {
        *dst = 0u;
    }
#if defined(__ARM_FP)
    /* CPACR: full access to CP10/CP11, else the first floating-point instruction faults. */
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
}

#endif
