// The protocol page: every service and method, then every message with its fields and every
// enum with its values, each with its comment from proto/ctrl/v1.
import { anchor, cell, generatedHeader, paragraphs, table } from "./markdown.ts";
import type { Field, Protocol } from "./proto.ts";

/** A type as the page shows it: a link to its section for one of ours, the bare name otherwise. */
export function typeLink(protocol: Protocol, type: string, page = ""): string {
  const ours = protocol.messages.get(type) ?? protocol.enums.get(type);
  if (!ours) return `\`${type.replace(/^google\.protobuf\./, "")}\``;
  return `[\`${ours.name}\`](${page}#${anchor(ours.name)})`;
}

function fieldType(protocol: Protocol, field: Field): string {
  if (field.map) return `map&lt;${typeLink(protocol, field.map.key)}, ${typeLink(protocol, field.map.value)}>`;
  const type = typeLink(protocol, field.type);
  return field.repeated ? `repeated ${type}` : field.optional ? `optional ${type}` : type;
}

export function protocolPage(protocol: Protocol): string {
  const lines = [
    generatedHeader("The protocol", "proto/ctrl/v1 (through `buf build`)"),
    "Package `ctrl.v1`, in " +
      protocol.files.map((f) => `\`proto/${f}\``).join(", ") +
      ". Every service answers Connect, gRPC and gRPC-Web on ctrl's one port; ctrl serves gRPC reflection, so `buf curl` needs no schema ([the API with buf curl](../guides/api.md)). JSON names (camelCase) are what the Connect JSON protocol and `buf curl -d` take.",
    "",
    "## Services",
    "",
  ];
  for (const service of protocol.services) {
    lines.push(`### ${service.name}`, "", `\`proto/${service.file}\``, "", paragraphs(service.comment), "");
    for (const method of service.methods) {
      const input = `${method.clientStreaming ? "stream " : ""}${typeLink(protocol, method.input)}`;
      const output = `${method.serverStreaming ? "stream " : ""}${typeLink(protocol, method.output)}`;
      lines.push(`#### ${service.name}.${method.name}`, "", `${input} → ${output}`, "", paragraphs(method.comment), "");
    }
  }
  lines.push("## Messages", "");
  for (const message of [...protocol.messages.values()].filter((m) => !m.mapEntry)) {
    lines.push(`### ${message.name}`, "", `\`proto/${message.file}\``, "");
    if (message.comment) lines.push(paragraphs(message.comment), "");
    if (message.fields.length === 0) {
      lines.push("No fields.", "");
      continue;
    }
    const rows = message.fields.map((f) => [
      `\`${f.name}\`${f.jsonName === f.name ? "" : ` (\`${f.jsonName}\`)`}`,
      fieldType(protocol, f),
      cell(`${f.oneof ? `One of \`${f.oneof}\`. ` : ""}${f.comment}`),
    ]);
    lines.push(table(["Field (JSON)", "Type", "Meaning"], rows), "");
  }
  lines.push("## Enums", "");
  for (const e of protocol.enums.values()) {
    lines.push(`### ${e.name}`, "", `\`proto/${e.file}\``, "");
    if (e.comment) lines.push(paragraphs(e.comment), "");
    lines.push(
      table(
        ["Value", "Number", "Meaning"],
        e.values.map((v) => [`\`${v.name}\``, String(v.number), cell(v.comment)]),
      ),
      "",
    );
  }
  return lines.join("\n");
}
