// The protocol as `buf build` sees it (proto/ctrl/v1, comments included): every service,
// method, message, field and enum, for the protocol page and the manifest page.
import { execFileSync } from "node:child_process";
import { join } from "node:path";

// Field numbers of descriptor.proto, the path elements of a comment's location.
const FILE_MESSAGE = 4;
const FILE_ENUM = 5;
const FILE_SERVICE = 6;
const MESSAGE_FIELD = 2;
const MESSAGE_NESTED = 3;
const MESSAGE_ENUM = 4;
const ENUM_VALUE = 2;
const SERVICE_METHOD = 2;

interface FieldProto {
  name: string;
  jsonName: string;
  label: string;
  type: string;
  typeName?: string;
  oneofIndex?: number;
  proto3Optional?: boolean;
}
interface MessageProto {
  name: string;
  field?: FieldProto[];
  nestedType?: MessageProto[];
  enumType?: EnumProto[];
  oneofDecl?: { name: string }[];
  options?: { mapEntry?: boolean };
}
interface EnumProto {
  name: string;
  value: { name: string; number?: number }[];
}
interface FileProto {
  name: string;
  package: string;
  messageType?: MessageProto[];
  enumType?: EnumProto[];
  service?: { name: string; method: { name: string; inputType: string; outputType: string; clientStreaming?: boolean; serverStreaming?: boolean }[] }[];
  sourceCodeInfo?: { location: { path?: number[]; leadingComments?: string }[] };
}

export interface Field {
  name: string;
  jsonName: string;
  repeated: boolean;
  optional: boolean;
  /** A scalar's name (string, int64, …) or a message's or enum's full name (ctrl.v1.Deployment). */
  type: string;
  /** For a map field: the key and value types. */
  map?: { key: string; value: string };
  oneof?: string;
  comment: string;
}
export interface Message {
  fullName: string;
  /** The name within its package: Deployment, Autoscaling.Metric. */
  name: string;
  file: string;
  comment: string;
  fields: Field[];
  mapEntry: boolean;
}
export interface Enum {
  fullName: string;
  name: string;
  file: string;
  comment: string;
  values: { name: string; number: number; comment: string }[];
}
export interface Method {
  name: string;
  input: string;
  output: string;
  clientStreaming: boolean;
  serverStreaming: boolean;
  comment: string;
}
export interface Service {
  name: string;
  file: string;
  comment: string;
  methods: Method[];
}
export interface Protocol {
  files: string[];
  services: Service[];
  messages: Map<string, Message>;
  enums: Map<string, Enum>;
}

const trimComment = (text: string | undefined) => (text ?? "").replace(/^ /gm, "").trim();

/** The protocol of `proto/ctrl`, read through `buf build` (its image as JSON, with source comments). */
export function readProtocol(root: string): Protocol {
  const image = JSON.parse(
    execFileSync(join(root, "node_modules/.bin/buf"), ["build", "--path", "proto/ctrl", "-o", "-#format=json"], {
      cwd: root,
      encoding: "utf8",
      maxBuffer: 64 << 20,
    }),
  ) as { file: FileProto[] };
  const protocol: Protocol = { files: [], services: [], messages: new Map(), enums: new Map() };
  for (const file of image.file.filter((f) => f.name.startsWith("ctrl/"))) {
    protocol.files.push(file.name);
    const comments = new Map((file.sourceCodeInfo?.location ?? []).map((l) => [(l.path ?? []).join(","), trimComment(l.leadingComments)]));
    const comment = (path: number[]) => comments.get(path.join(",")) ?? "";
    const addEnum = (e: EnumProto, prefix: string, path: number[]) => {
      const name = `${prefix}${e.name}`;
      protocol.enums.set(`${file.package}.${name}`, {
        fullName: `${file.package}.${name}`,
        name,
        file: file.name,
        comment: comment(path),
        values: e.value.map((v, i) => ({ name: v.name, number: v.number ?? 0, comment: comment([...path, ENUM_VALUE, i]) })),
      });
    };
    const addMessage = (m: MessageProto, prefix: string, path: number[]) => {
      const name = `${prefix}${m.name}`;
      protocol.messages.set(`${file.package}.${name}`, {
        fullName: `${file.package}.${name}`,
        name,
        file: file.name,
        comment: comment(path),
        mapEntry: m.options?.mapEntry === true,
        fields: (m.field ?? []).map((f, i) => ({
          name: f.name,
          jsonName: f.jsonName,
          repeated: f.label === "LABEL_REPEATED",
          optional: f.proto3Optional === true,
          type: f.typeName ? f.typeName.slice(1) : f.type.replace(/^TYPE_/, "").toLowerCase(),
          oneof: f.oneofIndex !== undefined && !f.proto3Optional ? m.oneofDecl?.[f.oneofIndex]?.name : undefined,
          comment: comment([...path, MESSAGE_FIELD, i]),
        })),
      });
      for (const [i, nested] of (m.nestedType ?? []).entries()) addMessage(nested, `${name}.`, [...path, MESSAGE_NESTED, i]);
      for (const [i, nested] of (m.enumType ?? []).entries()) addEnum(nested, `${name}.`, [...path, MESSAGE_ENUM, i]);
    };
    for (const [i, m] of (file.messageType ?? []).entries()) addMessage(m, "", [FILE_MESSAGE, i]);
    for (const [i, e] of (file.enumType ?? []).entries()) addEnum(e, "", [FILE_ENUM, i]);
    for (const [i, s] of (file.service ?? []).entries()) {
      protocol.services.push({
        name: s.name,
        file: file.name,
        comment: comment([FILE_SERVICE, i]),
        methods: s.method.map((m, j) => ({
          name: m.name,
          input: m.inputType.slice(1),
          output: m.outputType.slice(1),
          clientStreaming: m.clientStreaming === true,
          serverStreaming: m.serverStreaming === true,
          comment: comment([FILE_SERVICE, i, SERVICE_METHOD, j]),
        })),
      });
    }
  }
  // A map field is a repeated entry message: show it as map<key, value>.
  for (const message of protocol.messages.values()) {
    for (const field of message.fields) {
      const entry = protocol.messages.get(field.type);
      if (entry?.mapEntry) field.map = { key: entry.fields[0]!.type, value: entry.fields[1]!.type };
    }
  }
  return protocol;
}
