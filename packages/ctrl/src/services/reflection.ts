// grpc.reflection.v1 ServerReflection: lets `buf curl` and grpcurl call ctrl with no schema.
import { create, createRegistry, toBinary, type DescFile, type DescService, type Registry } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  ErrorResponseSchema,
  ExtensionNumberResponseSchema,
  FileDescriptorResponseSchema,
  ListServiceResponseSchema,
  type ServerReflection,
  ServerReflectionResponseSchema,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from "@flotilla/proto/grpc/reflection/v1/reflection_pb.js";

const GRPC_NOT_FOUND = 5;
const GRPC_INVALID_ARGUMENT = 3;

export function reflectionService(services: DescService[]): ServiceImpl<typeof ServerReflection> {
  const files = new Map<string, DescFile>();
  // By file name as in the descriptor ("ctrl/v1/region.proto"), which is what clients ask
  // for: DescFile.name has no ".proto".
  const addFile = (file: DescFile) => {
    if (files.has(file.proto.name)) return;
    files.set(file.proto.name, file);
    file.dependencies.forEach(addFile);
  };
  for (const s of services) addFile(s.file);
  const index: Index = { files, symbols: createRegistry(...files.values()), services: services.map((s) => s.typeName) };
  return {
    async *serverReflectionInfo(requests) {
      for await (const request of requests) yield answer(index, request);
    },
  };
}

interface Index {
  files: ReadonlyMap<string, DescFile>;
  symbols: Registry;
  services: string[];
}

function answer(index: Index, request: ServerReflectionRequest): ServerReflectionResponse {
  const response = create(ServerReflectionResponseSchema, { validHost: request.host, originalRequest: request });
  const fail = (errorCode: number, errorMessage: string) => {
    response.messageResponse = { case: "errorResponse", value: create(ErrorResponseSchema, { errorCode, errorMessage }) };
    return response;
  };
  const fileResponse = (file: DescFile | undefined, what: string) => {
    if (!file) return fail(GRPC_NOT_FOUND, `${what} not found`);
    response.messageResponse = {
      case: "fileDescriptorResponse",
      value: create(FileDescriptorResponseSchema, {
        fileDescriptorProto: withDependencies(file).map((f) => toBinary(FileDescriptorProtoSchema, f.proto)),
      }),
    };
    return response;
  };
  const req = request.messageRequest;
  switch (req.case) {
    case "listServices":
      response.messageResponse = {
        case: "listServicesResponse",
        value: create(ListServiceResponseSchema, {
          service: index.services.map((name) => ({ name })),
        }),
      };
      return response;
    case "fileByFilename":
      return fileResponse(index.files.get(req.value), `file ${req.value}`);
    case "fileContainingSymbol":
      return fileResponse(fileOfSymbol(index.symbols, req.value), `symbol ${req.value}`);
    case "allExtensionNumbersOfType":
      // No extensions are declared, so every known message has none.
      if (!index.symbols.getMessage(req.value)) return fail(GRPC_NOT_FOUND, `type ${req.value} not found`);
      response.messageResponse = {
        case: "allExtensionNumbersResponse",
        value: create(ExtensionNumberResponseSchema, { baseTypeName: req.value }),
      };
      return response;
    case "fileContainingExtension":
      return fail(GRPC_NOT_FOUND, `extension ${req.value.containingType}#${req.value.extensionNumber} not found`);
    default:
      return fail(GRPC_INVALID_ARGUMENT, "empty reflection request");
  }
}

/** The file declaring a type or service, or the one holding a method ("pkg.Service.Method") or field. */
function fileOfSymbol(symbols: Registry, symbol: string): DescFile | undefined {
  const desc = symbols.get(symbol) ?? symbols.get(symbol.slice(0, symbol.lastIndexOf(".")));
  return desc?.file;
}

/** The file first, then every file it imports, transitively (what reflection clients expect). */
function withDependencies(file: DescFile): DescFile[] {
  const seen = new Map<string, DescFile>();
  const visit = (f: DescFile) => {
    if (seen.has(f.name)) return;
    seen.set(f.name, f);
    f.dependencies.forEach(visit);
  };
  visit(file);
  return [...seen.values()];
}
