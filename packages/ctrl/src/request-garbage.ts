// What the request bodies ctrl reads leave behind, given back at once rather than at V8's pace.
// A body that came in several chunks is joined into a buffer of its own, an inflated one gets
// another (and a new envelope around it); connect copies the message out of what it is handed
// before it decodes it, so from then on these buffers are garbage. V8 frees a Buffer's memory
// only once a GC finds it dead, and collects for memory outside its heap only once that has
// grown by 64 MiB since its last full GC; under a burst of large requests many bodies live
// across two scavenges (waiting for the decode budget, for the database), are promoted, and
// wait for that full GC. Measured with bench/diag/burst-memory.ts under the authenticated
// fuzz: Buffers were +43 to +52 MiB of ctrl's peak above rest.
//
// So the buffers are freed as soon as connect has its copy (detached: every view of them reads
// as empty after, which is why only buffers the read allocated itself come here), and once the
// bytes freed reach --collect-after-request-bytes V8 is asked for a full GC, which collects the
// rest of those requests' garbage (the socket's chunks, connect's copy, the decoded messages).
// Peak above rest, 9 bursts each: +64.7 to +96.4 MiB, against +64.4 to +97.0 MiB with the
// buffers freed alone and +75 to +105 MiB before either; the Buffers at the peak went from +43–47
// to +23–35 MiB (docs/benchmarks.md, ctrl's decoding cost). Small requests come in one chunk and
// allocate nothing here, so ordinary traffic (agents' reports) triggers no GC.
import { collectSoon } from "@flotilla/malloc-trim";

export const DEFAULT_COLLECT_AFTER_REQUEST_BYTES = 16 * 1024 * 1024;

export class RequestGarbage {
  readonly #collectAfterBytes: number;
  readonly #collect: () => void;
  #freedSince = 0;

  /** `collectAfterBytes`: bytes freed between two requested GCs (0: none requested); `collect`: requests one. */
  constructor(collectAfterBytes: number, collect: () => void = collectSoon) {
    this.#collectAfterBytes = collectAfterBytes;
    this.#collect = collect;
  }

  /**
   * Frees `buffers` now: buffers no one views any more. Only whole buffers are freed (a small
   * Buffer is a slice of a pool others share), and each counts towards the next requested GC.
   */
  free(buffers: Iterable<Uint8Array>): void {
    for (const view of buffers) {
      const buffer = view.buffer;
      if (!(buffer instanceof ArrayBuffer) || view.byteOffset !== 0 || view.byteLength !== buffer.byteLength) continue;
      this.#freedSince += buffer.byteLength;
      buffer.transfer(0);
    }
    if (this.#collectAfterBytes > 0 && this.#freedSince >= this.#collectAfterBytes) {
      this.#freedSince = 0;
      this.#collect();
    }
  }
}
