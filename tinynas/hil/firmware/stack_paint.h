/* Measuring the stack a call uses: paint the free stack with a pattern before it, find the deepest word it changed
 * after. Shared by the test firmware (hil_main.c) and the tests' emulation harness (devtools/mcu/harness.c). */
#ifndef TINYNAS_STACK_PAINT_H
#define TINYNAS_STACK_PAINT_H

#include <stdint.h>

#define STACK_PATTERN 0xA5A5A5A5u

/* Fills every word from `limit` up to (not including) the caller's stack pointer with the pattern; naked so that
 * painting touches no stack itself. */
__attribute__((naked, noinline)) static void paint_stack(__attribute__((unused)) uint32_t *limit)
{
    __asm__ volatile(
        ".syntax unified\n\t"
        "mov r1, sp\n\t"
        "ldr r2, =0xA5A5A5A5\n\t"
        "1:\n\t"
        "cmp r0, r1\n\t"
        "bhs 2f\n\t"
        "str r2, [r0]\n\t"
        "adds r0, r0, #4\n\t"
        "b 1b\n\t"
        "2:\n\t"
        "bx lr\n\t"
        ".ltorg\n\t");
}

/* The caller's stack pointer. */
__attribute__((naked, noinline)) static uint32_t *stack_pointer(void)
{
    __asm__ volatile(
        "mov r0, sp\n\t"
        "bx lr\n\t");
}

/* The lowest word between `limit` and `sp` that no longer holds the pattern (`limit` itself: the stack overflowed
 * into everything that was painted). */
static inline uint32_t *deepest_change(uint32_t *limit, uint32_t *sp)
{
    uint32_t *low = limit;
    while (low < sp && *low == STACK_PATTERN) {
        ++low;
    }
    return low;
}

#endif
