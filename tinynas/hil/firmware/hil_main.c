/* tinynas hardware in the loop: the model's generated C runtime behind a test protocol on the board's UART.
 *
 * The protocol is the MLPerf Tiny runner's command set (ASCII; a command ends with '%', its words are separated by
 * spaces; every reply line starts with "m-" or, for an error, "e-", ends with CR LF, and every command is answered
 * last by "m-ready"), so the field's runner can drive this firmware too. tinynas adds what it checks on top:
 *
 *   name%          m-name-tinynas-hil
 *   profile%       m-profile-[tinynas-hil-1]  m-model-[HASH]  m-board-[NAME]  m-counter-[KIND,HZ]
 *                  m-sizes-[INPUT,OUTPUT]  m-stack-available-[BYTES]
 *   db load N%     m-[Expecting N bytes]           (N is the model's input size, int8)
 *   db HEX%        the bytes, two hex digits each; m-load-done once N have come
 *   infer N W%     W warm-up calls and N counted calls of the model on the loaded window:
 *                  m-warmup-start-W  m-warmup-done  m-infer-start-N  m-infer-done
 *                  m-counts-[C1,...,CN]  m-stack-[PEAK]  m-results-[O1,...]
 *   results%       m-results-[O1,...] of the last call
 *
 * Counts are of the board's counter (hil_config.h: DWT's cycle counter, or a timer; under QEMU with -icount shift=0
 * a timer counts instructions). The stack is painted below main's frame before the counted calls; the peak is the
 * deepest word they changed. A fault prints e-[fault] and resets the chip, which the host sees as a reset. */
#include <stdint.h>
#include <string.h>

#include "hil_config.h"
#include "stack_paint.h"
#include HIL_MODEL_HEADER

#define COMMAND_MAX 600u
#define REG32(address) (*(volatile uint32_t *)(address))

extern uint32_t __stack_limit[];

static int8_t window[HIL_INPUT_SIZE] __attribute__((aligned(4)));
static int8_t output[HIL_OUTPUT_SIZE] __attribute__((aligned(4)));
static char command[COMMAND_MAX + 1u];
static uint32_t loaded, expected;
static uint32_t *main_sp;

void hil_fault(void) __attribute__((noreturn));

/* ---- the UART: polled, no interrupts ---- */
#if defined(HIL_UART_CMSDK)
/* CMSDK APB UART (Arm MPS2 images): DATA, STATE (bit 0 TX full, bit 1 RX full), CTRL (TX, RX enable), BAUDDIV. */
static void uart_init(void)
{
    REG32(HIL_UART_BASE + 0x10u) = HIL_CLOCK_HZ / HIL_BAUD;
    REG32(HIL_UART_BASE + 0x08u) = 3u;
}
static void uart_put(char c)
{
    while (REG32(HIL_UART_BASE + 0x04u) & 1u) {
    }
    REG32(HIL_UART_BASE + 0x00u) = (uint8_t)c;
}
static char uart_get(void)
{
    while (!(REG32(HIL_UART_BASE + 0x04u) & 2u)) {
    }
    return (char)REG32(HIL_UART_BASE + 0x00u);
}
#elif defined(HIL_UART_NRF)
/* Nordic UART0 (nRF51; the nRF52's legacy UART at the same address): events and tasks, pins by number. */
#define GPIO_PIN_CNF(pin) (0x50000700u + 4u * (pin))
static void uart_init(void)
{
    REG32(GPIO_PIN_CNF(HIL_UART_TX_PIN)) = 1u; /* output */
    REG32(GPIO_PIN_CNF(HIL_UART_RX_PIN)) = 0u; /* input, buffer connected */
    REG32(HIL_UART_BASE + 0x50Cu) = HIL_UART_TX_PIN;
    REG32(HIL_UART_BASE + 0x514u) = HIL_UART_RX_PIN;
    REG32(HIL_UART_BASE + 0x524u) = 0x01D7E000u; /* 115200 baud */
    REG32(HIL_UART_BASE + 0x500u) = 4u;          /* ENABLE */
    REG32(HIL_UART_BASE + 0x000u) = 1u;          /* TASKS_STARTRX */
    REG32(HIL_UART_BASE + 0x008u) = 1u;          /* TASKS_STARTTX */
}
static void uart_put(char c)
{
    REG32(HIL_UART_BASE + 0x11Cu) = 0u;
    REG32(HIL_UART_BASE + 0x51Cu) = (uint8_t)c;
    while (!REG32(HIL_UART_BASE + 0x11Cu)) {
    }
}
static char uart_get(void)
{
    while (!REG32(HIL_UART_BASE + 0x108u)) {
    }
    REG32(HIL_UART_BASE + 0x108u) = 0u;
    return (char)REG32(HIL_UART_BASE + 0x518u);
}
#else
#error "hil_config.h names no UART"
#endif

/* ---- the counter: a 32-bit up-count read around each call ---- */
#if defined(HIL_COUNTER_DWT)
/* The core's cycle counter (Cortex-M3 and up): DEMCR.TRCENA, then DWT_CTRL.CYCCNTENA. */
static void counter_start(void)
{
    REG32(0xE000EDFCu) |= 1u << 24;
    REG32(0xE0001004u) = 0u;
    REG32(0xE0001000u) |= 1u;
}
static void counter_restart(void)
{
    REG32(0xE0001004u) = 0u;
}
static inline uint32_t counter_read(void)
{
    return REG32(0xE0001004u);
}
#elif defined(HIL_COUNTER_NRF_TIMER)
/* Nordic TIMER0 at 16 MHz, 32 bit, read by CAPTURE[0]. */
static void counter_start(void)
{
    REG32(0x40008504u) = 0u;
    REG32(0x40008508u) = 3u;
    REG32(0x40008510u) = 0u;
    REG32(0x4000800Cu) = 1u;
    REG32(0x40008000u) = 1u;
}
static void counter_restart(void)
{
    REG32(0x4000800Cu) = 1u; /* TASKS_CLEAR: the count starts again from 0 at this instruction */
}
static inline uint32_t counter_read(void)
{
    REG32(0x40008040u) = 1u;
    return REG32(0x40008540u);
}
#elif defined(HIL_COUNTER_CMSDK_TIMER)
/* CMSDK APB TIMER0 of the MPS2 images, counting down from 0xFFFFFFFF at the system clock. */
static void counter_start(void)
{
    REG32(0x40000008u) = 0xFFFFFFFFu;
    REG32(0x40000004u) = 0xFFFFFFFFu;
    REG32(0x40000000u) = 1u;
}
static void counter_restart(void)
{
    REG32(0x40000004u) = 0xFFFFFFFFu; /* VALUE: the count starts again at this instruction */
}
static inline uint32_t counter_read(void)
{
    return ~REG32(0x40000004u);
}
#else
#error "hil_config.h names no counter"
#endif

/* ---- writing ---- */
static void put(const char *text)
{
    while (*text) {
        uart_put(*text++);
    }
}

static void put_u32(uint32_t value)
{
    char digits[10];
    unsigned n = 0u;
    do {
        digits[n++] = (char)('0' + value % 10u);
        value /= 10u;
    } while (value);
    while (n) {
        uart_put(digits[--n]);
    }
}

static void put_i32(int32_t value)
{
    if (value < 0) {
        uart_put('-');
        put_u32((uint32_t)(-(value + 1)) + 1u);
    } else {
        put_u32((uint32_t)value);
    }
}

static void put_line(const char *head, uint32_t value, const char *tail)
{
    put(head);
    put_u32(value);
    put(tail);
}

static void put_results(void)
{
    put("m-results-[");
    for (uint32_t i = 0u; i < HIL_OUTPUT_SIZE; ++i) {
        if (i) {
            uart_put(',');
        }
        put_i32(output[i]);
    }
    put("]\r\n");
}

/* ---- commands ---- */
static int parse_u32(const char *text, uint32_t *value)
{
    uint32_t result = 0u;
    if (!text || !*text) {
        return 0;
    }
    for (; *text; ++text) {
        if (*text < '0' || *text > '9' || result > 99999999u) {
            return 0;
        }
        result = result * 10u + (uint32_t)(*text - '0');
    }
    *value = result;
    return 1;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* The words of `line`, split at spaces in place: at most `most`. */
static unsigned split(char *line, char **words, unsigned most)
{
    unsigned n = 0u;
    while (*line && n < most) {
        while (*line == ' ') {
            *line++ = '\0';
        }
        if (!*line) {
            break;
        }
        words[n++] = line;
        while (*line && *line != ' ') {
            ++line;
        }
    }
    return n;
}

/* The painted stack below main's frame (0 where main's own frame already reaches past the limit). */
static uint32_t stack_available(void)
{
    return (uintptr_t)main_sp > (uintptr_t)__stack_limit ? (uint32_t)((uintptr_t)main_sp - (uintptr_t)__stack_limit)
                                                          : 0u;
}

static void db(char **words, unsigned n)
{
    uint32_t count;
    if (n >= 3u && strcmp(words[1], "load") == 0) {
        if (!parse_u32(words[2], &count) || count != HIL_INPUT_SIZE) {
            put_line("e-[db load: this model takes ", HIL_INPUT_SIZE, " bytes]\r\n");
            return;
        }
        expected = count;
        loaded = 0u;
        put_line("m-[Expecting ", count, " bytes]\r\n");
        return;
    }
    if (n == 2u && expected) {
        const char *hex = words[1];
        size_t digits = strlen(hex);
        if (digits % 2u) {
            put("e-[db: an odd number of hex digits]\r\n");
            return;
        }
        for (size_t i = 0u; i < digits && loaded < expected; i += 2u) {
            int high = hex_digit(hex[i]), low = hex_digit(hex[i + 1u]);
            if (high < 0 || low < 0) {
                put("e-[db: not a hex digit]\r\n");
                return;
            }
            window[loaded++] = (int8_t)(uint8_t)(high * 16 + low);
        }
        if (loaded == expected) {
            put("m-load-done\r\n");
        }
        return;
    }
    put("e-[db: give load N, then the bytes in hex]\r\n");
}

static void infer(char **words, unsigned n)
{
    uint32_t runs = 1u, warmup = 0u, before, after;
    uint32_t *low;
    if ((n >= 2u && !parse_u32(words[1], &runs)) || (n >= 3u && !parse_u32(words[2], &warmup)) || runs == 0u
        || runs > 1000u || warmup > 1000u) {
        put("e-[infer N W: 1 to 1000 runs, 0 to 1000 warm-up calls]\r\n");
        return;
    }
    if (loaded != HIL_INPUT_SIZE) {
        put("e-[infer: load a window first (db load N, then db HEX)]\r\n");
        return;
    }
    put_line("m-warmup-start-", warmup, "\r\n");
    while (warmup--) {
        (void)HIL_INFER(window, output);
    }
    put("m-warmup-done\r\n");
    put_line("m-infer-start-", runs, "\r\n");
    put("m-counts-[");
    paint_stack(__stack_limit);
    for (uint32_t i = 0u; i < runs; ++i) {
        /* Restarted here: the count of a fixed stretch of code is then the same on every run, where a timer
         * coarser than a cycle would otherwise round by a tick depending on when the window happened to arrive. */
        counter_restart();
        before = counter_read();
        int status = HIL_INFER(window, output);
        after = counter_read();
        if (status != 0) {
            put("]\r\n");
            put_line("e-[the model returned ", (uint32_t)status, "]\r\n");
            return;
        }
        if (i) {
            uart_put(',');
        }
        put_u32(after - before);
    }
    put("]\r\n");
    low = deepest_change(__stack_limit, main_sp);
    put("m-infer-done\r\n");
    if (low == __stack_limit) {
        put_line("e-[stack overflow: the model needs more than the ", stack_available(),
                 " B of stack this board leaves it]\r\n");
        return;
    }
    put_line("m-stack-[", (uint32_t)((uintptr_t)main_sp - (uintptr_t)low), "]\r\n");
    put_results();
}

static void dispatch(char *line)
{
    char *words[4];
    unsigned n = split(line, words, 4u);
    if (n == 0u) {
    } else if (strcmp(words[0], "name") == 0) {
        put("m-name-tinynas-hil\r\n");
    } else if (strcmp(words[0], "profile") == 0) {
        put("m-profile-[tinynas-hil-1]\r\nm-model-[" HIL_MODEL_HASH "]\r\nm-board-[" HIL_BOARD "]\r\n");
        put("m-counter-[" HIL_COUNTER_KIND ",");
        put_u32(HIL_COUNTER_HZ);
        put("]\r\n");
        put_line("m-sizes-[", HIL_INPUT_SIZE, ",");
        put_u32(HIL_OUTPUT_SIZE);
        put("]\r\n");
        put_line("m-stack-available-[", stack_available(), "]\r\n");
    } else if (strcmp(words[0], "db") == 0) {
        db(words, n);
    } else if (strcmp(words[0], "infer") == 0) {
        infer(words, n);
    } else if (strcmp(words[0], "results") == 0) {
        put_results();
    } else {
        put("e-[unknown command ");
        put(words[0]);
        put("]\r\n");
    }
    put("m-ready\r\n");
}

int main(void)
{
    uint32_t length = 0u;
    int too_long = 0;
    uart_init();
    counter_start();
    main_sp = stack_pointer();
    put("m-init-done\r\nm-ready\r\n");
    for (;;) {
        char c = uart_get();
        if (c == '%') {
            command[length] = '\0';
            if (too_long) {
                put("e-[command too long]\r\nm-ready\r\n");
            } else {
                dispatch(command);
            }
            length = 0u;
            too_long = 0;
        } else if (c == '\r' || c == '\n') {
        } else if (length < COMMAND_MAX) {
            command[length++] = c;
        } else {
            too_long = 1;
        }
    }
}

void hil_fault(void)
{
    put("e-[fault]\r\n");
    REG32(0xE000ED0Cu) = 0x05FA0004u; /* AIRCR.SYSRESETREQ: the host sees the chip start again */
    for (;;) {
    }
}
