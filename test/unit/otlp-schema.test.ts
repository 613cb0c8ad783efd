import protobuf from 'protobufjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { ProtoRoot } from '../../src/otlp/proto-root.js';
import {
  CODE_COUNTS,
  CODE_ID_MASK,
  CODE_ID_SHIFT,
  CODE_KIND_MASK,
  CODE_KIND_SHIFT,
  CODE_MSG_SHIFT,
  CODE_WIRE_MASK,
  ENUMS,
  FIELD_CODES,
  KIND_PROTO_TYPE,
  Kind,
  MESSAGES,
  MSG_BASE,
  MSG_MAX_FIELD,
  ROOT_MSG,
  fieldOf,
} from '../../src/otlp/schema.js';

// protobufjs wire types of its basic types (for fields that are not messages or enums).
const PROTOBUFJS_WIRE: Record<string, number> = {
  double: 1,
  fixed64: 1,
  fixed32: 5,
  uint32: 0,
  int64: 0,
  bool: 0,
  string: 2,
  bytes: 2,
};

let root: protobuf.Root;

beforeAll(() => {
  // keepCase: compare the proto (snake_case) names as written in proto/.
  root = new protobuf.Root();
  const dir = ProtoRoot.protoDir();
  root.resolvePath = (_o, target) => (target.startsWith('/') ? target : `${dir}/${target}`);
  root.loadSync(
    ['opentelemetry/proto/collector/logs/v1/logs_service.proto', 'opentelemetry/proto/collector/trace/v1/trace_service.proto'],
    { keepCase: true },
  );
  root.resolveAll();
});

describe('schema.ts against protobufjs reflection of proto/', () => {
  it.each(MESSAGES.map((m) => [m.fullName, m] as const))('%s matches field for field', (_name, m) => {
    const type = root.lookupType(m.fullName);
    const reflected = [...type.fieldsArray].sort((a, b) => a.id - b.id);
    expect(m.fields.map((f) => f.number)).toEqual(reflected.map((f) => f.id));
    for (const rf of reflected) {
      const f = fieldOf(m.id, rf.id);
      expect(f, `${m.name} field ${rf.id}`).toBeDefined();
      if (!f) continue;
      expect(f.name).toBe(rf.name);
      expect(f.jsonName).toBe(protobuf.util.camelCase(rf.name));
      expect(f.repeated).toBe(rf.repeated);
      expect(f.oneof).toBe(rf.partOf !== null && rf.partOf !== undefined);
      const resolved = rf.resolvedType;
      if (resolved instanceof protobuf.Type) {
        expect(f.kind).toBe(Kind.MESSAGE);
        expect(f.message).not.toBe(-1);
        expect(`.${MESSAGES[f.message as number].fullName}`).toBe(resolved.fullName);
        expect(f.wireType).toBe(2);
      } else if (resolved instanceof protobuf.Enum) {
        expect(f.kind).toBe(Kind.ENUM);
        expect(f.enumType).not.toBe(-1);
        const e = ENUMS[f.enumType as number];
        expect(`.${e.fullName}`).toBe(resolved.fullName);
        expect(f.wireType).toBe(0);
      } else {
        expect(KIND_PROTO_TYPE[f.kind]).toBe(rf.type);
        expect(f.wireType).toBe(PROTOBUFJS_WIRE[rf.type]);
      }
    }
  });

  it.each(ENUMS.map((e) => [e.fullName, e] as const))('enum %s has the same values', (_n, e) => {
    const reflected = root.lookupEnum(e.fullName);
    const byNumber = Object.entries(reflected.values).sort((a, b) => a[1] - b[1]);
    expect(e.values).toEqual(byNumber.map(([name]) => name));
    expect(byNumber.map(([, v]) => v)).toEqual(e.values.map((_n2, i) => i));
  });

  it('holds exactly the messages reachable from the two export requests', () => {
    const reachable = new Set<string>();
    const visit = (t: protobuf.Type): void => {
      if (reachable.has(t.fullName)) return;
      reachable.add(t.fullName);
      for (const f of t.fieldsArray) if (f.resolvedType instanceof protobuf.Type) visit(f.resolvedType);
    };
    for (const id of Object.values(ROOT_MSG)) visit(root.lookupType(MESSAGES[id].fullName));
    expect([...reachable].sort()).toEqual(MESSAGES.map((m) => `.${m.fullName}`).sort());
  });

  it('lists the messages in id order', () => {
    MESSAGES.forEach((m, i) => expect(m.id).toBe(i));
  });

  it('marks the record fields, the id fields and nothing else', () => {
    const counting = MESSAGES.flatMap((m) => m.fields.filter((f) => f.countsRecords).map((f) => `${m.name}.${f.name}`));
    expect(counting).toEqual(['ScopeLogs.log_records', 'ScopeSpans.spans']);
    const ids = MESSAGES.flatMap((m) => m.fields.filter((f) => f.idLength !== 0).map((f) => `${m.name}.${f.name}:${f.idLength}`));
    expect(ids.sort()).toEqual(
      [
        'LogRecord.trace_id:16',
        'LogRecord.span_id:8',
        'Span.trace_id:16',
        'Span.span_id:8',
        'Span.parent_span_id:8',
        'Span.Link.trace_id:16',
        'Span.Link.span_id:8',
      ].sort(),
    );
  });

  it('has no packable repeated field: repeated fields are messages or strings only', () => {
    for (const m of MESSAGES) {
      for (const f of m.fields) if (f.repeated) expect([Kind.MESSAGE, Kind.STRING]).toContain(f.kind);
    }
  });

  it('packs every field into FIELD_CODES and leaves every other number empty', () => {
    for (const m of MESSAGES) {
      expect(MSG_MAX_FIELD[m.id]).toBe(Math.max(...m.fields.map((f) => f.number)));
      for (let n = 0; n <= MSG_MAX_FIELD[m.id]; n++) {
        const code = FIELD_CODES[MSG_BASE[m.id] + n];
        const f = fieldOf(m.id, n);
        if (!f) {
          expect(code, `${m.name} ${n}`).toBe(0);
          continue;
        }
        expect(code & CODE_WIRE_MASK).toBe(f.wireType);
        expect((code >>> CODE_KIND_SHIFT) & CODE_KIND_MASK).toBe(f.kind);
        expect((code & CODE_COUNTS) !== 0).toBe(f.countsRecords);
        expect((code >>> CODE_ID_SHIFT) & CODE_ID_MASK).toBe(f.idLength);
        expect(code >>> CODE_MSG_SHIFT).toBe(f.message === -1 ? 0 : f.message);
      }
    }
  });
});
