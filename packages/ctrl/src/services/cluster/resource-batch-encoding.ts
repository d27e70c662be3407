// A snapshot batch's ResourceBatch encoded straight from the stored bodies. A stored body is
// the wire form of DesiredResource without `version`; protobuf allows fields in any order, so
// body + `version` (field 3) is the exact encoding of the decoded resource. One allocation per
// batch (building it with a BinaryWriter per resource was most of a sync's CPU: allocations
// and their GC), the large bodies referenced rather than copied.
import { varintSize, writeVarint } from "@flotilla/runtime/wire";
import type { SnapshotRow } from "@flotilla/store";

const RESOURCES_TAG = (1 << 3) | 2; // ResourceBatch.resources: length-delimited
const VERSION_TAG = (3 << 3) | 0; // DesiredResource.version: varint

/** Bodies from this size are sent by reference; smaller ones are copied (a chunk each would cost more than the copy). */
const REFERENCED_BODY_BYTES = 4096;

/**
 * Length prefix + encoding of `ResourceBatch{resources}` with each row's body and version: the
 * field data of a message field holding that batch (see `messageWithVerbatimChunks`), in chunks. Large
 * bodies are chunks of their own, the stored bytes themselves: a stream whose client does not
 * read holds no copy of them.
 */
export function resourceBatchFieldChunks(rows: readonly SnapshotRow[]): Uint8Array[] {
  let batchLength = 0;
  let copiedBytes = 0;
  for (const row of rows) {
    const resourceLength = row.body.length + 1 + varintSize(row.version);
    const headerLength = 1 + varintSize(resourceLength);
    batchLength += headerLength + resourceLength;
    copiedBytes += resourceLength + headerLength - (row.body.length >= REFERENCED_BODY_BYTES ? row.body.length : 0);
  }
  const out = Buffer.allocUnsafe(varintSize(batchLength) + copiedBytes);
  const chunks: Uint8Array[] = [];
  let start = 0;
  let pos = writeVarint(out, 0, batchLength);
  for (const row of rows) {
    out[pos++] = RESOURCES_TAG;
    pos = writeVarint(out, pos, row.body.length + 1 + varintSize(row.version));
    if (row.body.length >= REFERENCED_BODY_BYTES) {
      chunks.push(out.subarray(start, pos), row.body);
      start = pos;
    } else {
      out.set(row.body, pos);
      pos += row.body.length;
    }
    out[pos++] = VERSION_TAG;
    pos = writeVarint(out, pos, row.version);
  }
  chunks.push(out.subarray(start, pos));
  return chunks;
}
