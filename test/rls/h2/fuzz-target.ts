/**
 * The fuzz target fuzz.test.ts drives (`fuzz` is its entry, one input per call). The
 * first byte picks what the rest feeds:
 *  - even: the HPACK decoder, with the server's bounds (SETTINGS_HEADER_TABLE_SIZE 4096, a block
 *    at most twice the 16 KiB header list bound, as the connection gathers it), block after block
 *    on one decoder so the dynamic table carries over;
 *  - odd: a whole H2Connection after the preface: the frame parser of onData, the header blocks,
 *    settings, windows and streams, the bytes cut into chunks whose sizes the input also picks.
 * The invariants checked: nothing is thrown but the module's own protocol errors (CompressionError
 * out of the decoder; the connection catches its ConnectionError itself, so anything out of
 * onData is a bug), the dynamic table stays within its bound, the streams held stay within
 * maxConcurrentStreams. A hang is caught by the driver timing each input.
 * The connection's socket is a node Duplex that swallows writes: a real TCP socket per input
 * would cost more than the parser, and the parser never reads the socket, only its 'data'.
 */
import { Duplex } from "node:stream";
import type { Socket } from "node:net";
import { H2Connection } from "../../../src/rls/h2/connection.js";
import { PREFACE, settingsFrame } from "../../../src/rls/h2/frames.js";
import { CompressionError, HEADER_TABLE_SIZE, HpackDecoder } from "../../../src/rls/h2/hpack/hpack.js";
import type { H2Limits, StreamHandler } from "../../../src/rls/h2/stream.js";

/** the gRPC server's own (ring-grpc-server.ts) */
const MAX_HEADER_LIST_BYTES = 16 * 1024;
const MAX_STREAMS = 8;

class BoundBroken extends Error {}

function fuzzHpack(data: Buffer): void {
  const decoder = new HpackDecoder(HEADER_TABLE_SIZE);
  // blocks split at each 0xff 0x00 pair: several blocks share one dynamic table, as a connection's do
  let from = 1;
  while (from <= data.length) {
    let to = data.indexOf("\xff\x00", from, "latin1");
    if (to < 0) to = data.length;
    const end = Math.min(to, from + MAX_HEADER_LIST_BYTES * 2);
    let fields = 0;
    try {
      const listSize = decoder.decode(data, from, end, () => fields++);
      // every field costs at least 32 (RFC 7541 §4.1)
      if (listSize < fields * 32) throw new BoundBroken(`list size ${listSize} below ${fields} fields`);
    } catch (err) {
      if (!(err instanceof CompressionError)) throw err;
      return; // a connection error: the connection, and its decoder, end here
    }
    if (decoder.tableSize > HEADER_TABLE_SIZE) throw new BoundBroken(`table ${decoder.tableSize} past ${HEADER_TABLE_SIZE}`);
    from = to + 2;
  }
}

const handler: StreamHandler = {
  opened: () => {},
  complete: (stream, tooLarge) => (tooLarge ? stream.fail(8, "too large") : stream.reply(Buffer.from("ok"))),
  expired: (stream) => stream.fail(4, "deadline"),
};

function fuzzConnection(data: Buffer): void {
  const socket = new Duplex({
    read() {},
    write(_chunk, _encoding, done) {
      done();
    },
  }) as unknown as Socket;
  socket.setNoDelay = () => socket;
  const limits: H2Limits = {
    maxConcurrentStreams: MAX_STREAMS,
    maxHeaderListBytes: MAX_HEADER_LIST_BYTES,
    maxBodyBytes: 4096,
    pending: { bytes: 0, max: 64 * 1024 },
  };
  const connection = new H2Connection(socket, handler, limits, () => {}, Date.now());
  socket.emit("data", Buffer.concat([PREFACE, settingsFrame([])]));
  // byte 1 picks the chunk size (1..64, or the whole rest at 0): frames cut at any byte
  const chunk = data.length > 1 ? data[1]! % 65 : 0;
  let p = 2;
  while (p < data.length && !connection.closed) {
    const end = chunk === 0 ? data.length : Math.min(data.length, p + chunk);
    socket.emit("data", data.subarray(p, end));
    p = end;
    if (connection.streams.size > MAX_STREAMS) throw new BoundBroken(`${connection.streams.size} streams held`);
  }
  socket.destroy();
}

export function fuzz(data: Buffer): void {
  if (data.length === 0) return;
  if ((data[0]! & 1) === 0) fuzzHpack(data);
  else fuzzConnection(data);
}
