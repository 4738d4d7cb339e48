// A grpc-go client of ringlimit's gRPC port, driven by test/rls/grpc-go.process.test.ts.
// Messages are hand-encoded protobuf through a raw codec, so the build needs only grpc-go.
// Usage: grpcgo ADDR KEY MODE; prints one JSON object per result line on stdout.
// KEY "-" sends no authorization. TLS when GRPCGO_CA names the server's CA (PEM); a client
// certificate too when GRPCGO_CERT and GRPCGO_KEY name its PEM files (mutual TLS).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // registers "gzip" for grpc.UseCompressor
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const method = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// rawCodec passes bytes through: requests are encoded by hand below.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

func varint(n uint64) []byte {
	var b []byte
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

func lenField(field int, body []byte) []byte {
	out := append(varint(uint64(field<<3|2)), varint(uint64(len(body)))...)
	return append(out, body...)
}

func uintField(field int, n uint64) []byte { return append(varint(uint64(field<<3)), varint(n)...) }

// request: RateLimitRequest{domain, descriptors: [{entries: [{key, value}], limit: {perUnit, unit: DAY}}]}.
// A day's window, so that a window boundary cannot split one run's counts.
func request(domain, key, value string, perDay uint64) []byte {
	entry := lenField(1, append(lenField(1, []byte(key)), lenField(2, []byte(value))...))
	limit := lenField(2, append(uintField(1, perDay), uintField(2, 4)...))
	return append(lenField(1, []byte(domain)), lenField(2, append(entry, limit...))...)
}

// fields reads the top-level varint and length-delimited fields of a message: field -> values.
func fields(b []byte) (map[int][]uint64, map[int][][]byte) {
	ints, bytes := map[int][]uint64{}, map[int][][]byte{}
	read := func() uint64 {
		var n uint64
		for s := 0; len(b) > 0; s += 7 {
			c := b[0]
			b = b[1:]
			n |= uint64(c&0x7f) << s
			if c < 0x80 {
				break
			}
		}
		return n
	}
	for len(b) > 0 {
		tag := read()
		switch tag & 7 {
		case 0:
			ints[int(tag>>3)] = append(ints[int(tag>>3)], read())
		case 2:
			n := read()
			if n > uint64(len(b)) {
				return ints, bytes
			}
			bytes[int(tag>>3)] = append(bytes[int(tag>>3)], b[:n])
			b = b[n:]
		default:
			return ints, bytes
		}
	}
	return ints, bytes
}

type result struct {
	Code      string `json:"code"`
	Message   string `json:"message,omitempty"`
	Overall   uint64 `json:"overall,omitempty"`   // RateLimitResponse.overall_code: 1 OK, 2 OVER_LIMIT
	Remaining int64  `json:"remaining,omitempty"` // statuses[0].limit_remaining, -1 when absent
	Ms        int64  `json:"ms"`
}

func decode(resp []byte, err error, start time.Time) result {
	r := result{Code: status.Code(err).String(), Ms: time.Since(start).Milliseconds(), Remaining: -1}
	if err != nil {
		r.Message = status.Convert(err).Message()
		return r
	}
	ints, msgs := fields(resp)
	if len(ints[1]) > 0 {
		r.Overall = ints[1][0]
	}
	if len(msgs[2]) > 0 {
		st, _ := fields(msgs[2][0])
		r.Remaining = 0 // proto3: a zero is not on the wire
		if len(st[3]) > 0 {
			r.Remaining = int64(st[3][0])
		}
	}
	return r
}

func emit(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}

// transport: plaintext (h2c), or TLS from GRPCGO_CA / GRPCGO_CERT / GRPCGO_KEY.
func transport() credentials.TransportCredentials {
	caFile := os.Getenv("GRPCGO_CA")
	if caFile == "" {
		return insecure.NewCredentials()
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		fail("GRPCGO_CA: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		fail("GRPCGO_CA: no certificate in %s", caFile)
	}
	// the server's name is checked: its certificate names 127.0.0.1, the address dialled
	config := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if certFile := os.Getenv("GRPCGO_CERT"); certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, os.Getenv("GRPCGO_KEY"))
		if err != nil {
			fail("GRPCGO_CERT: %v", err)
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(config)
}

func main() {
	if len(os.Args) != 4 {
		fail("usage: grpcgo ADDR KEY keepalive|once|gzip|concurrent|goaway")
	}
	addr, key, mode := os.Args[1], os.Args[2], os.Args[3]
	var dials atomic.Int32 // every TCP connection the channel opens: one means it was never dropped
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(transport()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, "tcp", a)
		}),
	}
	if mode == "keepalive" {
		// 10 s is grpc-go's minimum Time; without a stream open, so the pings are all there is
		opts = append(opts, grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		fail("dial: %v", err)
	}
	defer conn.Close()
	ctxWith := func(d time.Duration) (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		if key == "-" {
			return ctx, cancel
		}
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key), cancel
	}
	call := func(value string, d time.Duration, extra ...grpc.CallOption) result {
		ctx, cancel := ctxWith(d)
		defer cancel()
		req, resp := request("grpcgo", "k", value, 1000), []byte(nil)
		start := time.Now()
		err := conn.Invoke(ctx, method, &req, &resp, extra...)
		return decode(resp, err, start)
	}
	// states the channel passes through after the first READY, in order
	var statesMu sync.Mutex
	states := []string{}
	watchStates := func() {
		conn.Connect()
		s := conn.GetState()
		for {
			if !conn.WaitForStateChange(context.Background(), s) {
				return
			}
			s = conn.GetState()
			statesMu.Lock()
			states = append(states, s.String())
			statesMu.Unlock()
		}
	}

	switch mode {
	case "keepalive":
		first := call("keepalive", 10*time.Second)
		go watchStates()
		idle, _ := time.ParseDuration(os.Getenv("GRPCGO_IDLE"))
		if idle == 0 {
			idle = 25 * time.Second
		}
		time.Sleep(idle) // no stream open: two keepalive pings at 10 s and 20 s
		second := call("keepalive", 10*time.Second)
		statesMu.Lock()
		emit(map[string]any{"first": first, "second": second, "dials": dials.Load(), "states": states})
		statesMu.Unlock()
	case "once":
		emit(call("once", 5*time.Second))
	case "gzip":
		emit(call("gzip", 60*time.Second, grpc.UseCompressor("gzip")))
		emit(map[string]any{"after": call("gzip", 10*time.Second), "dials": dials.Load()})
	case "concurrent":
		n := 200
		results := make([]result, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = call("concurrent", 30*time.Second)
			}()
		}
		wg.Wait()
		emit(map[string]any{"results": results, "dials": dials.Load()})
	case "goaway":
		goaway(conn, ctxWith, call, &dials)
	default:
		fail("unknown mode %q", mode)
	}
}

// goaway: opens streams whose request is not sent yet, says "open" once the server has seen
// their headers, waits for the channel to leave READY (the GOAWAY of the SIGTERM the test
// sends), then finishes them; then one new call, which must fail UNAVAILABLE.
func goaway(conn *grpc.ClientConn, ctxWith func(time.Duration) (context.Context, context.CancelFunc), call func(string, time.Duration, ...grpc.CallOption) result, dials *atomic.Int32) {
	n := 8
	desc := &grpc.StreamDesc{StreamName: "ShouldRateLimit", ClientStreams: true}
	streams := make([]grpc.ClientStream, n)
	for i := range n {
		ctx, cancel := ctxWith(60 * time.Second)
		defer cancel()
		s, err := conn.NewStream(ctx, desc, method)
		if err != nil {
			fail("stream %d: %v", i, err)
		}
		streams[i] = s
	}
	// frames on one connection arrive in order: this answer means the headers above were read
	before := call("goaway", 10*time.Second)
	emit(map[string]any{"open": n, "before": before})
	wait, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	left := false // grpc-go leaves READY when the GOAWAY arrives
	for s := conn.GetState(); ; s = conn.GetState() {
		if s != connectivity.Ready {
			left = true
			break
		}
		if !conn.WaitForStateChange(wait, s) {
			break
		}
	}
	// a call after the GOAWAY, while the node still drains the streams above
	after := call("goaway", 20*time.Second)
	inflight := make([]result, n)
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			req, resp := request("grpcgo", "k", "goaway", 1000), []byte(nil)
			err := s.SendMsg(&req)
			if err == nil {
				err = s.CloseSend()
			}
			if err == nil {
				err = s.RecvMsg(&resp)
			}
			inflight[i] = decode(resp, err, start)
		}()
	}
	wg.Wait()
	emit(map[string]any{"left": left, "inflight": inflight, "after": after, "dials": dials.Load()})
}
