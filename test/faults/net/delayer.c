/*
 * A slow, lossy link for the fault suite, because `tc netem` does not exist on the
 * kernels this suite runs on. An iptables rule sends the link's packets to NFQUEUE
 * `queue`; this program drops `loss_permille`/1000 of them at random and releases the
 * rest `delay_ms` later, in arrival order (a constant delay keeps the queue FIFO, like
 * netem's). Built at test time by test/faults/net/delayer.ts:
 *
 *   gcc -O2 -o delayer delayer.c -lnetfilter_queue
 *   ip netns exec <ns> ./delayer <queue> <delay_ms> <loss_permille> <seed>
 *
 * Prints "ready" once bound; exits on SIGTERM. Packets still held when it exits are
 * dropped by the kernel, so the caller removes its iptables rule first.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h> /* NF_ACCEPT, NF_DROP: after <arpa/inet.h>, or the two define struct in_addr twice */
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define CAPACITY 65536 /* packets held at once: 150 ms of a busy peer link is a few thousand */

struct held {
  uint32_t id;
  uint64_t due_ms;
};

static struct held ring[CAPACITY];
static size_t head = 0, count = 0;
static uint64_t delay_ms;
static uint32_t loss_permille;
static uint64_t rng;
static volatile sig_atomic_t stop = 0;
static unsigned long passed = 0, dropped = 0;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* xorshift64*: reproducible loss for a given seed */
static uint32_t next_random(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (uint32_t)((rng * 2685821657736338717ULL) >> 32);
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *data) {
  (void)msg;
  (void)data;
  struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
  if (ph == NULL) return 0;
  uint32_t id = ntohl(ph->packet_id);
  if (next_random() % 1000 < loss_permille || count == CAPACITY) {
    dropped++;
    return nfq_set_verdict(qh, id, NF_DROP, 0, NULL);
  }
  ring[(head + count) % CAPACITY] = (struct held){id, now_ms() + delay_ms};
  count++;
  return 0;
}

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s <queue> <delay_ms> <loss_permille> <seed>\n", argv[0]);
    return 2;
  }
  uint16_t queue = (uint16_t)atoi(argv[1]);
  delay_ms = (uint64_t)atoll(argv[2]);
  loss_permille = (uint32_t)atoi(argv[3]);
  rng = (uint64_t)atoll(argv[4]) | 1;
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);

  struct nfq_handle *h = nfq_open();
  if (h == NULL) {
    perror("nfq_open");
    return 1;
  }
  struct nfq_q_handle *qh = nfq_create_queue(h, queue, &on_packet, NULL);
  if (qh == NULL) {
    perror("nfq_create_queue");
    return 1;
  }
  /* The verdict needs only the packet id: copy no payload to user space. */
  if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0) {
    perror("nfq_set_mode");
    return 1;
  }
  nfq_set_queue_maxlen(qh, CAPACITY);
  int fd = nfq_fd(h);
  int one = 1;
  setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);
  printf("ready\n");
  fflush(stdout);

  char buf[4096] __attribute__((aligned));
  while (!stop) {
    int timeout = -1;
    if (count > 0) {
      uint64_t now = now_ms(), due = ring[head].due_ms;
      timeout = due > now ? (int)(due - now) : 0;
    }
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, timeout);
    if (r < 0 && errno != EINTR) break;
    if (r > 0 && (p.revents & POLLIN)) {
      ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) nfq_handle_packet(h, buf, (int)n);
    }
    uint64_t now = now_ms();
    while (count > 0 && ring[head].due_ms <= now) {
      nfq_set_verdict(qh, ring[head].id, NF_ACCEPT, 0, NULL);
      passed++;
      head = (head + 1) % CAPACITY;
      count--;
    }
  }
  fprintf(stderr, "delayer: passed %lu, dropped %lu, held at exit %zu\n", passed, dropped, count);
  nfq_destroy_queue(qh);
  nfq_close(h);
  return 0;
}
