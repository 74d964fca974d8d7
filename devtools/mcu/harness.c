/* The emulation harness: reads input windows from a host file through semihosting, runs
 * tinynas_infer on each, and writes one record per window to another host file: the outputs, the
 * timer ticks the call took, and the peak stack the call used.
 *
 * Host file "windows.bin": the windows back to back, TINYNAS_INPUT_SIZE int8 each.
 * Host file "results.bin": a 20-byte header (magic "TNH1", input size, output size, timer ticks per
 * second, bytes of stack available below main's frame), then per window a record of ticks (u32),
 * peak stack bytes (u32), tinynas_infer's return value (i32), then TINYNAS_OUTPUT_SIZE int8 outputs.
 * All little-endian.
 *
 * Counting instructions: QEMU runs with -icount shift=0, under which every guest instruction moves
 * virtual time on by exactly 1 ns, and the board's timers count virtual time. So ticks * 1e9 / hz is
 * the instructions executed between the two timer reads, to within one tick. */
#include <stdint.h>
#include <string.h>

#include TINYNAS_MODEL_HEADER
#include "semihost.h"
#include "stack_paint.h"

#define RECORD_HEAD 12

extern uint32_t __stack_limit[];

static int8_t window[TINYNAS_INPUT_SIZE] __attribute__((aligned(4)));
static int8_t record[RECORD_HEAD + TINYNAS_OUTPUT_SIZE] __attribute__((aligned(4)));

/* ---- the timer: one 32-bit up-count of virtual time per board, no interrupts ---- */
#if defined(TINYNAS_BOARD_NRF51)
/* nRF51 TIMER0 at 16 MHz (prescaler 0), 32-bit; read by triggering CAPTURE[0]. */
#define TIMER_HZ 16000000u
#define NRF_TIMER0 0x40008000u
#define REG(offset) (*(volatile uint32_t *)(NRF_TIMER0 + (offset)))
static void timer_start(void)
{
    REG(0x504) = 0u; /* MODE: timer */
    REG(0x508) = 3u; /* BITMODE: 32 bit */
    REG(0x510) = 0u; /* PRESCALER: 16 MHz */
    REG(0x00C) = 1u; /* TASKS_CLEAR */
    REG(0x000) = 1u; /* TASKS_START */
}
static inline uint32_t timer_read(void)
{
    REG(0x040) = 1u; /* TASKS_CAPTURE[0] */
    return REG(0x540); /* CC[0] */
}
#elif defined(TINYNAS_BOARD_MPS2)
/* CMSDK APB TIMER0 of the MPS2 FPGA images, clocked at 25 MHz, counting down from 0xFFFFFFFF. */
#define TIMER_HZ 25000000u
#define CMSDK_TIMER0 0x40000000u
#define REG(offset) (*(volatile uint32_t *)(CMSDK_TIMER0 + (offset)))
static void timer_start(void)
{
    REG(0x8) = 0xFFFFFFFFu; /* RELOAD */
    REG(0x4) = 0xFFFFFFFFu; /* VALUE */
    REG(0x0) = 1u;          /* CTRL: enable, no interrupt */
}
static inline uint32_t timer_read(void)
{
    return ~REG(0x4);
}
#else
#error "define TINYNAS_BOARD_NRF51 or TINYNAS_BOARD_MPS2"
#endif

static void put_u32(int8_t *at, uint32_t value)
{
    uint8_t bytes[4];
    bytes[0] = (uint8_t)value;
    bytes[1] = (uint8_t)(value >> 8);
    bytes[2] = (uint8_t)(value >> 16);
    bytes[3] = (uint8_t)(value >> 24);
    memcpy(at, bytes, 4);
}

static int fail(const char *why)
{
    sh_print("tinynas-harness: ");
    sh_print(why);
    sh_print("\n");
    return 1;
}

int main(void)
{
    static const char windows_name[] = "windows.bin";
    static const char results_name[] = "results.bin";
    int8_t header[20];
    int32_t in_file = sh_open(windows_name, sizeof windows_name - 1u, SH_MODE_RB);
    int32_t out_file = sh_open(results_name, sizeof results_name - 1u, SH_MODE_WB);
    uint32_t *sp;

    if (in_file < 0 || out_file < 0) {
        return fail("cannot open windows.bin or results.bin in QEMU's working folder");
    }
    timer_start();
    sp = stack_pointer();
    memcpy(header, "TNH1", 4);
    put_u32(header + 4, TINYNAS_INPUT_SIZE);
    put_u32(header + 8, TINYNAS_OUTPUT_SIZE);
    put_u32(header + 12, TIMER_HZ);
    put_u32(header + 16, (uint32_t)((uintptr_t)sp - (uintptr_t)__stack_limit));
    if (sh_write(out_file, header, sizeof header) != 0u) {
        return fail("cannot write results.bin");
    }
    while (sh_read(in_file, window, TINYNAS_INPUT_SIZE) == 0u) {
        int8_t *output = record + RECORD_HEAD;
        uint32_t *low;
        uint32_t before, after;
        int status;

        paint_stack(__stack_limit);
        before = timer_read();
        status = tinynas_infer(window, output);
        after = timer_read();
        /* The lowest word the call changed marks how deep its stack went. */
        low = deepest_change(__stack_limit, sp);
        if (low == __stack_limit) {
            return fail("stack overflow: tinynas_infer used all the RAM left below main's frame");
        }
        put_u32(record, after - before);
        put_u32(record + 4, (uint32_t)((uintptr_t)sp - (uintptr_t)low));
        put_u32(record + 8, (uint32_t)status);
        if (sh_write(out_file, record, sizeof record) != 0u) {
            return fail("cannot write results.bin");
        }
    }
    sh_close(in_file);
    sh_close(out_file);
    return 0;
}
