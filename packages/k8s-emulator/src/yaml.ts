// Request body decoding. Clients almost always send JSON (also for
// `application/apply-patch+yaml`, since JSON is valid YAML), so JSON is tried
// first; hand-written YAML (curl, kubectl-style manifests) is handled by a
// small block-YAML parser covering mappings, sequences, plain/quoted scalars,
// literal/folded block scalars and single-line flow collections. Anchors,
// tags and multi-line flow collections are not supported and yield an error.

export class DecodeError extends Error {}

interface Line {
  indent: number;
  text: string;
  no: number;
}

export function decodeBody(text: string): unknown {
  const trimmed = text.trim();
  if (trimmed === '') throw new DecodeError('empty body');
  if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
    try {
      return JSON.parse(trimmed);
    } catch (err) {
      // A flow-style YAML document can still be valid; fall through and let the
      // YAML parser decide, but report the JSON error if that fails too.
      try {
        return parseYaml(text);
      } catch {
        throw new DecodeError((err as Error).message);
      }
    }
  }
  return parseYaml(text);
}

function stripComment(line: string): string {
  let quote = '';
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = '';
      else if (c === '\\' && quote === '"') i++;
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (c === '#' && (i === 0 || line[i - 1] === ' ' || line[i - 1] === '\t')) {
      return line.slice(0, i);
    }
  }
  return line;
}

export function parseYaml(text: string): unknown {
  const raw = text.replace(/\r\n?/g, '\n').split('\n');
  const lines: Line[] = [];
  let docs = 0;
  raw.forEach((l, i) => {
    if (/^---(\s|$)/.test(l)) {
      if (++docs > 1 || lines.length > 0) throw new DecodeError('multiple YAML documents are not supported');
      return;
    }
    if (/^\.\.\.(\s|$)/.test(l)) return;
    if (l.includes('\t') && /^\s*\t/.test(l)) throw new DecodeError(`line ${i + 1}: tabs are not allowed for indentation`);
    const body = stripComment(l).replace(/\s+$/, '');
    if (body.trim() === '') return;
    lines.push({ indent: body.length - body.trimStart().length, text: body.trimStart(), no: i + 1 });
  });
  if (lines.length === 0) throw new DecodeError('empty YAML document');
  const parser = new BlockParser(lines, raw);
  const value = parser.parseNode(lines[0].indent);
  if (parser.pos < lines.length) throw new DecodeError(`line ${lines[parser.pos].no}: unexpected content`);
  return value;
}

const isSeqItem = (t: string) => t === '-' || t.startsWith('- ');

/** Index of the `:` separating a mapping key from its value, or -1. */
function keySeparator(text: string): number {
  let quote = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = '';
      else if (c === '\\' && quote === '"') i++;
    } else if ((c === '"' || c === "'") && i === 0) {
      quote = c;
    } else if (c === '{' || c === '[') {
      if (i === 0) return -1;
    } else if (c === ':' && (i + 1 === text.length || text[i + 1] === ' ')) {
      return i;
    }
  }
  return -1;
}

class BlockParser {
  pos = 0;
  private readonly lines: Line[];
  private readonly raw: string[];

  constructor(lines: Line[], raw: string[]) {
    this.lines = lines;
    this.raw = raw;
  }

  parseNode(indent: number): unknown {
    const line = this.lines[this.pos];
    if (isSeqItem(line.text)) return this.parseSequence(indent);
    if (keySeparator(line.text) >= 0) return this.parseMapping(indent);
    this.pos++;
    return parseScalarOrFlow(line.text, line.no);
  }

  private parseSequence(indent: number): unknown[] {
    const out: unknown[] = [];
    while (this.pos < this.lines.length) {
      const line = this.lines[this.pos];
      if (line.indent !== indent || !isSeqItem(line.text)) break;
      const rest = line.text.slice(1).trimStart();
      if (rest === '') {
        this.pos++;
        out.push(this.childOf(indent, false));
      } else if (isSeqItem(rest) || keySeparator(rest) >= 0) {
        // `- key: v` starts a nested node whose indentation is the column of `key`.
        const column = indent + (line.text.length - rest.length);
        this.lines[this.pos] = { indent: column, text: rest, no: line.no };
        out.push(this.parseNode(column));
      } else {
        this.pos++;
        out.push(parseScalarOrFlow(rest, line.no));
      }
    }
    return out;
  }

  private parseMapping(indent: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    while (this.pos < this.lines.length) {
      const line = this.lines[this.pos];
      if (line.indent < indent) break;
      if (line.indent > indent) throw new DecodeError(`line ${line.no}: bad indentation of a mapping entry`);
      if (isSeqItem(line.text)) break;
      const sep = keySeparator(line.text);
      if (sep < 0) throw new DecodeError(`line ${line.no}: expected a mapping entry "key: value"`);
      const key = parseKey(line.text.slice(0, sep).trim(), line.no);
      if (Object.hasOwn(out, key)) throw new DecodeError(`line ${line.no}: duplicate key ${JSON.stringify(key)}`);
      const rest = line.text.slice(sep + 1).trim();
      this.pos++;
      if (rest === '') out[key] = this.childOf(indent, true);
      else if (/^[|>][-+]?$/.test(rest)) out[key] = this.blockScalar(indent, rest, line.no);
      else out[key] = parseScalarOrFlow(rest, line.no);
    }
    return out;
  }

  /** The value of an entry whose content starts on the next line (or null when empty). */
  private childOf(indent: number, allowSameIndentSeq: boolean): unknown {
    const next = this.lines[this.pos];
    if (!next) return null;
    if (next.indent > indent) return this.parseNode(next.indent);
    // `key:\n- a` (sequence at the key's own indentation) is valid YAML.
    if (allowSameIndentSeq && next.indent === indent && isSeqItem(next.text)) return this.parseSequence(indent);
    return null;
  }

  private blockScalar(indent: number, header: string, lineNo: number): string {
    // Block scalars keep comments and blank lines verbatim, so read the raw text.
    const body: string[] = [];
    let i = lineNo; // raw index of the line after the header
    let blockIndent = -1;
    for (; i < this.raw.length; i++) {
      const l = this.raw[i];
      if (l.trim() === '') {
        body.push('');
        continue;
      }
      const ind = l.length - l.trimStart().length;
      if (ind <= indent) break;
      if (blockIndent < 0) blockIndent = ind;
      body.push(l.slice(Math.min(ind, blockIndent)));
    }
    while (this.pos < this.lines.length && this.lines[this.pos].no <= i) this.pos++;
    while (body.length && body[body.length - 1] === '') body.pop();
    let text = header[0] === '|' ? body.join('\n') : body.join('\n').replace(/([^\n])\n(?=[^\n])/g, '$1 ');
    if (!header.endsWith('-')) text += '\n';
    return text;
  }
}

function parseKey(text: string, no: number): string {
  if (text.startsWith('"') || text.startsWith("'")) {
    const v = parseScalarOrFlow(text, no);
    if (typeof v !== 'string') throw new DecodeError(`line ${no}: bad key`);
    return v;
  }
  return text;
}

function parseScalarOrFlow(text: string, no: number): unknown {
  if (text.startsWith('[') || text.startsWith('{')) {
    const p = new FlowParser(text, no);
    const v = p.value();
    p.end();
    return v;
  }
  if (text.startsWith('&') || text.startsWith('*') || text.startsWith('!')) {
    throw new DecodeError(`line ${no}: anchors, aliases and tags are not supported`);
  }
  if (text.startsWith('"')) {
    try {
      return JSON.parse(text);
    } catch {
      throw new DecodeError(`line ${no}: bad double-quoted string`);
    }
  }
  if (text.startsWith("'")) {
    if (!/^'([^']|'')*'$/.test(text)) throw new DecodeError(`line ${no}: bad single-quoted string`);
    return text.slice(1, -1).replace(/''/g, "'");
  }
  return plainScalar(text);
}

function plainScalar(text: string): unknown {
  if (/^(null|Null|NULL|~)$/.test(text)) return null;
  if (/^(true|True|TRUE)$/.test(text)) return true;
  if (/^(false|False|FALSE)$/.test(text)) return false;
  if (/^[-+]?(0|[1-9]\d*)$/.test(text)) return Number(text);
  if (/^0x[0-9a-fA-F]+$/.test(text)) return Number.parseInt(text.slice(2), 16);
  if (/^[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$/.test(text)) return Number(text);
  return text;
}

class FlowParser {
  private i = 0;
  private readonly s: string;
  private readonly no: number;

  constructor(s: string, no: number) {
    this.s = s;
    this.no = no;
  }

  private fail(what: string): never {
    throw new DecodeError(`line ${this.no}: ${what} in flow collection`);
  }

  private ws(): void {
    while (this.s[this.i] === ' ') this.i++;
  }

  end(): void {
    this.ws();
    if (this.i !== this.s.length) this.fail('trailing content');
  }

  value(): unknown {
    this.ws();
    const c = this.s[this.i];
    if (c === '[') return this.seq();
    if (c === '{') return this.map();
    if (c === '"' || c === "'") return this.quoted();
    const start = this.i;
    while (this.i < this.s.length && !',]}'.includes(this.s[this.i]) && !(this.s[this.i] === ':' && this.s[this.i + 1] === ' ')) this.i++;
    const text = this.s.slice(start, this.i).trim();
    if (text === '') this.fail('missing value');
    return plainScalar(text);
  }

  private quoted(): string {
    const q = this.s[this.i];
    let j = this.i + 1;
    while (j < this.s.length) {
      if (q === '"' && this.s[j] === '\\') j += 2;
      else if (this.s[j] === q && q === "'" && this.s[j + 1] === "'") j += 2;
      else if (this.s[j] === q) break;
      else j++;
    }
    if (j >= this.s.length) this.fail('unterminated string');
    const v = parseScalarOrFlow(this.s.slice(this.i, j + 1), this.no) as string;
    this.i = j + 1;
    return v;
  }

  private seq(): unknown[] {
    this.i++;
    const out: unknown[] = [];
    this.ws();
    if (this.s[this.i] === ']') {
      this.i++;
      return out;
    }
    for (;;) {
      out.push(this.value());
      this.ws();
      const c = this.s[this.i++];
      if (c === ']') return out;
      if (c !== ',') this.fail('expected , or ]');
    }
  }

  private map(): Record<string, unknown> {
    this.i++;
    const out: Record<string, unknown> = {};
    this.ws();
    if (this.s[this.i] === '}') {
      this.i++;
      return out;
    }
    for (;;) {
      const key = this.value();
      this.ws();
      if (this.s[this.i] !== ':') this.fail('expected :');
      this.i++;
      out[String(key)] = this.value();
      this.ws();
      const c = this.s[this.i++];
      if (c === '}') return out;
      if (c !== ',') this.fail('expected , or }');
    }
  }
}
