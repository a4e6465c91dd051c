/*
 * Java Paimon as an oracle for the interop tests (tests/interop/java_env.py compiles and runs it).
 *
 * Compiles unchanged against Paimon 0.9.0 and 1.0-SNAPSHOT: it uses only FileStoreTableFactory,
 * LocalFileIO, ReadBuilder, RecordReader and the DataGetters accessors, which both versions share,
 * and switches on type-root names (not enum constants) so roots one version lacks cannot break it.
 *
 *   java -cp <classes>:<paimon jars> PaimonHarness read [--columns=a,b] <table_path>...
 *   java -cp <classes>:<paimon jars> PaimonHarness write [--compact] <table_path> <rows.jsonl> <out_file>
 *   java -cp <classes>:<paimon jars> PaimonHarness commit <table_path> <messages_file> <version> <user> <id>
 *   java -cp <classes>:<paimon jars> PaimonHarness script <ops.jsonl>
 *
 * write: one JSON object per line of rows.jsonl (field name -> value, missing = null; "_row_kind"
 * "+I"/"-U"/"+U"/"-D" for primary-key tables) is written with the table's BatchWriteBuilder; the
 * CommitMessages of prepareCommit() are NOT committed but serialized with
 * CommitMessageSerializer.serializeList into out_messages_file, and stdout carries one JSON line
 *   {"version": serializer version, "messages": count, "rows": count}
 * --compact also asks for a full compaction (TableWrite.compact(partition, bucket, true)) of every
 * (partition, bucket) the rows went to, so the messages carry compaction results too.
 * Input values: BOOLEAN true/false; TINYINT..BIGINT integers; FLOAT/DOUBLE numbers (or "NaN",
 * "Infinity", "-Infinity"); DECIMAL string or number; CHAR/VARCHAR string; BINARY/VARBINARY base64;
 * DATE integer days since 1970-01-01 or "yyyy-mm-dd"; TIME integer milliseconds of the day;
 * TIMESTAMP(p)/TIMESTAMP_LTZ(p) integer epoch microseconds, or a string "yyyy-MM-ddTHH:mm:ss[.n...]"
 * (LocalDateTime.parse; LTZ: the instant in UTC) for nanoseconds.
 *
 * commit: the messages_file (CommitMessageSerializer.serializeList bytes of the given version) is
 * deserialized and committed with a StreamTableCommit for <user> and identifier <id>; stdout carries
 *   {"snapshot": latest snapshot id after the commit, "messages": count}
 *
 * script: one JSON object per line of ops.jsonl, run in order in this one JVM, each answered by one JSON
 * line on stdout (or {"op": ..., "table": ..., "error": "<stack trace>"}, and the next op follows):
 *   {"op": "write", "table": path, "rows": [row, ...]}: written as by write (same row format) and
 *     committed by Java's own BatchTableCommit -> {"op": "write", "table": path, "snapshot": id}
 *   {"op": "compact", "table": path, "buckets": [b, ...]}: a full compaction of those buckets of an
 *     unpartitioned table, committed -> {"op": "compact", "table": path, "snapshot": id}
 *   {"op": "read", "table": path, "columns": [...]}: a read as by read ->
 *     {"op": "read", "table": path, "header": <the read header line>, "rows": [row, ...]}
 *   {"op": "create_branch", "table": path, "branch": name}: Table.createBranch(name) (an empty branch
 *     with the latest schema) -> {"op": "create_branch", "table": path}
 *   {"op": "create_tag", "table": path, "tag": name, "snapshot": id}: Table.createTag(name, id) (the
 *     latest snapshot without "snapshot") -> {"op": "create_tag", "table": path}
 *   {"op": "tags", "table": path}: TagManager.tags(), every tag file parsed ->
 *     {"op": "tags", "table": path, "tags": {name: {"snapshot": id, "schema": id}, ...}}
 * Any op may carry "options": {key: value}, the table's dynamic options (FileStoreTableFactory.create
 * with them: {"branch": "b1"} writes or reads branch b1, {"scan.fallback-branch": "b1"} reads with it,
 * {"scan.tag-name": "t1"} reads tag t1).
 * Exit status: 0 when every op succeeded, 1 when any failed.
 *
 * --columns=a,b projects the tables after it onto those columns (ReadBuilder.withProjection), until
 * the next --columns= (an empty list reads every column again).
 *
 * For each table, in the order given, stdout carries one JSON line
 *   {"table": path, "snapshot": id-or-null, "fields": [names], "types": [Paimon SQL types]}
 * then one JSON object per row of a full batch read of the latest snapshot (field name -> value, in
 * the order of the read type). A table that cannot be read prints the single line
 *   {"table": path, "error": "<stack trace>"}
 * instead, and the next table follows. Exit status: 0 when every table was read, 1 when any was not,
 * 2 on bad usage. Whatever the libraries log goes to stderr (System.out is redirected there), with
 * one timing line per table.
 *
 * Canonical values:
 *   BOOLEAN -> true/false; TINYINT/SMALLINT/INT/BIGINT -> JSON integers;
 *   FLOAT/DOUBLE -> JSON numbers from Double.toString (a FLOAT is widened to double first, exactly);
 *     NaN/Infinity/-Infinity as the strings "NaN", "Infinity", "-Infinity";
 *   DECIMAL(p, s) -> string, BigDecimal.toPlainString() (scale s kept: "1.50" for DECIMAL(5, 2));
 *   CHAR/VARCHAR/STRING -> string; BINARY/VARBINARY/BYTES -> base64 string (standard alphabet, padded);
 *   DATE -> integer days since 1970-01-01; TIME(p) -> integer milliseconds of the day;
 *   TIMESTAMP(p) -> "yyyy-MM-ddTHH:mm:ss.nnnnnnnnn" (always 9 fraction digits, proleptic Gregorian,
 *     computed from the epoch millis and nano-of-milli Paimon holds, no time zone applied);
 *   TIMESTAMP_LTZ(p) -> the same with a trailing "Z" (the instant Paimon holds, in UTC);
 *   ARRAY -> list; MAP -> list of [key, value] pairs; MULTISET -> list of [element, count] pairs;
 *     ROW -> list of its field values; any other type -> {"unsupported": "<type>"};
 *   NULL -> null.
 * A value Java throws on (a RuntimeException from a getter) prints as {"java_error": "<exception>"},
 * so the rest of the row and of the table still print.
 * A row whose kind is not +I carries "_row_kind": "+U", "-U" or "-D".
 */

import java.io.FileOutputStream;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.LocalDate;
import java.io.FileDescriptor;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.BufferedWriter;
import java.nio.charset.StandardCharsets;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.OptionalLong;

import org.apache.paimon.data.BinaryRow;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.DataGetters;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.data.Decimal;
import org.apache.paimon.data.InternalArray;
import org.apache.paimon.data.InternalMap;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.data.Timestamp;
import org.apache.paimon.disk.IOManager;
import org.apache.paimon.fs.Path;
import org.apache.paimon.io.DataInputDeserializer;
import org.apache.paimon.io.DataOutputSerializer;
import org.apache.paimon.fs.local.LocalFileIO;
import org.apache.paimon.options.Options;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.FileStoreTableFactory;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.CommitMessage;
import org.apache.paimon.table.sink.CommitMessageSerializer;
import org.apache.paimon.table.sink.StreamTableCommit;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.table.source.Split;
import org.apache.paimon.types.ArrayType;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DataTypeChecks;
import org.apache.paimon.types.MapType;
import org.apache.paimon.types.MultisetType;
import org.apache.paimon.types.RowKind;
import org.apache.paimon.types.RowType;

public final class PaimonHarness {

    private static final String TMP = System.getProperty("java.io.tmpdir");

    private static final DateTimeFormatter SECONDS =
            DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss");

    private PaimonHarness() {}

    public static void main(String[] args) throws Exception {
        PrintStream realOut =
                new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        System.setOut(System.err); // library logging must never interleave with the JSON
        if (args.length == 4 && args[0].equals("write")) {
            String result = write(args[1], args[2], args[3], false);
            realOut.println(result);
            realOut.flush();
            System.exit(0);
        }
        if (args.length == 5 && args[0].equals("write") && args[1].equals("--compact")) {
            String result = write(args[2], args[3], args[4], true);
            realOut.println(result);
            realOut.flush();
            System.exit(0);
        }
        if (args.length == 6 && args[0].equals("commit")) {
            String result =
                    commit(args[1], args[2], Integer.parseInt(args[3]), args[4], Long.parseLong(args[5]));
            realOut.println(result);
            realOut.flush();
            System.exit(0);
        }
        if (args.length == 2 && args[0].equals("script")) {
            BufferedWriter out =
                    new BufferedWriter(new OutputStreamWriter(realOut, StandardCharsets.UTF_8), 1 << 16);
            int failed = script(args[1], out);
            out.flush();
            System.exit(failed == 0 ? 0 : 1);
        }
        if (args.length < 2 || !args[0].equals("read")) {
            System.err.println(
                    "usage: PaimonHarness read [--columns=a,b] <table_path>...\n"
                            + "       PaimonHarness write [--compact] <table_path> <rows.jsonl> <out_file>\n"
                            + "       PaimonHarness commit <table_path> <messages_file> <version> <user> <id>\n"
                            + "       PaimonHarness script <ops.jsonl>");
            System.exit(2);
        }
        BufferedWriter out =
                new BufferedWriter(new OutputStreamWriter(realOut, StandardCharsets.UTF_8), 1 << 16);
        int failed = 0;
        List<String> columns = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            String path = args[i];
            if (path.startsWith("--columns=")) {
                columns.clear();
                for (String name : path.substring("--columns=".length()).split(",")) {
                    if (!name.isEmpty()) {
                        columns.add(name);
                    }
                }
                continue;
            }
            List<String> lines = new ArrayList<>();
            long started = System.nanoTime();
            try {
                readTable(path, columns, lines);
                long millis = (System.nanoTime() - started) / 1_000_000;
                System.err.printf("PaimonHarness: read %s (%d rows) in %d ms%n", path, lines.size() - 1, millis);
            } catch (Throwable t) {
                failed++;
                StringWriter trace = new StringWriter();
                t.printStackTrace(new PrintWriter(trace));
                lines.clear();
                lines.add("{\"table\":" + str(path) + ",\"error\":" + str(trace.toString()) + "}");
            }
            for (String line : lines) {
                out.write(line);
                out.write('\n');
            }
            out.flush();
        }
        out.flush();
        System.exit(failed == 0 ? 0 : 1);
    }

    private static String write(String path, String rowsFile, String outFile, boolean compact)
            throws Exception {
        FileStoreTable table = FileStoreTableFactory.create(LocalFileIO.create(), new Path(path));
        ObjectMapper mapper = new ObjectMapper();
        List<JsonNode> nodes = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(rowsFile), StandardCharsets.UTF_8)) {
            if (!line.trim().isEmpty()) {
                nodes.add(mapper.readTree(line));
            }
        }
        List<CommitMessage> messages = writeRows(table, table.newBatchWriteBuilder(), nodes, compact);
        int rows = nodes.size();
        CommitMessageSerializer serializer = new CommitMessageSerializer();
        DataOutputSerializer out = new DataOutputSerializer(4096);
        serializer.serializeList(messages, out);
        Files.write(Paths.get(outFile), out.getCopyOfBuffer());
        return "{\"version\":" + serializer.getVersion() + ",\"messages\":" + messages.size()
                + ",\"rows\":" + rows + "}";
    }

    /** Runs the ops of a script file (see the header); returns how many failed. */
    private static int script(String opsFile, BufferedWriter out) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        int failed = 0;
        for (String line : Files.readAllLines(Paths.get(opsFile), StandardCharsets.UTF_8)) {
            if (line.trim().isEmpty()) {
                continue;
            }
            JsonNode op = mapper.readTree(line);
            String kind = op.get("op").asText();
            String path = op.get("table").asText();
            String prefix = "{\"op\":" + str(kind) + ",\"table\":" + str(path);
            long started = System.nanoTime();
            String result;
            try {
                FileStoreTable table = openTable(path, op.path("options"));
                if (kind.equals("create_branch")) {
                    table.createBranch(op.get("branch").asText());
                    result = prefix + "}";
                } else if (kind.equals("create_tag")) {
                    if (op.has("snapshot")) {
                        table.createTag(op.get("tag").asText(), op.get("snapshot").asLong());
                    } else {
                        table.createTag(op.get("tag").asText());
                    }
                    result = prefix + "}";
                } else if (kind.equals("tags")) {
                    List<String> tags = new ArrayList<>();
                    for (Map.Entry<org.apache.paimon.Snapshot, List<String>> e :
                            table.tagManager().tags().entrySet()) {
                        for (String name : e.getValue()) {
                            tags.add(str(name) + ":{\"snapshot\":" + e.getKey().id()
                                    + ",\"schema\":" + e.getKey().schemaId() + "}");
                        }
                    }
                    result = prefix + ",\"tags\":{" + String.join(",", tags) + "}}";
                } else if (kind.equals("read")) {
                    List<String> columns = new ArrayList<>();
                    op.path("columns").forEach(c -> columns.add(c.asText()));
                    List<String> lines = new ArrayList<>();
                    readTable(table, path, columns, lines);
                    result = prefix + ",\"header\":" + lines.get(0) + ",\"rows\":["
                            + String.join(",", lines.subList(1, lines.size())) + "]}";
                } else {
                    BatchWriteBuilder builder = table.newBatchWriteBuilder();
                    List<CommitMessage> messages;
                    if (kind.equals("write")) {
                        List<JsonNode> rows = new ArrayList<>();
                        op.get("rows").forEach(rows::add);
                        messages = writeRows(table, builder, rows, false);
                    } else if (kind.equals("compact")) {
                        try (IOManager io = IOManager.create(TMP);
                                BatchTableWrite write = builder.newWrite()) {
                            write.withIOManager(io);
                            for (JsonNode bucket : op.get("buckets")) {
                                write.compact(BinaryRow.EMPTY_ROW, bucket.asInt(), true);
                            }
                            messages = write.prepareCommit();
                        }
                    } else {
                        throw new IllegalArgumentException("unknown op " + kind);
                    }
                    try (BatchTableCommit commit = builder.newCommit()) {
                        commit.commit(messages);
                    }
                    OptionalLong snapshot = table.latestSnapshotId();
                    result = prefix + ",\"snapshot\":"
                            + (snapshot.isPresent() ? Long.toString(snapshot.getAsLong()) : "null") + "}";
                }
                System.err.printf("PaimonHarness: %s %s in %d ms%n", kind, path, (System.nanoTime() - started) / 1_000_000);
            } catch (Throwable t) {
                failed++;
                StringWriter trace = new StringWriter();
                t.printStackTrace(new PrintWriter(trace));
                result = prefix + ",\"error\":" + str(trace.toString()) + "}";
            }
            out.write(result);
            out.write('\n');
            out.flush();
        }
        return failed;
    }

    /** Writes rows (JSON objects as in the header) with a BatchTableWrite of builder; with compact, also
     * fully compacts every (partition, bucket) they went to. The messages are not committed. */
    private static List<CommitMessage> writeRows(
            FileStoreTable table, BatchWriteBuilder builder, List<JsonNode> nodes, boolean compact)
            throws Exception {
        List<DataField> fields = table.rowType().getFields();
        List<CommitMessage> messages;
        Map<BinaryRow, Set<Integer>> touched = new LinkedHashMap<>();
        // an IOManager: lookup compaction (first-row tables, lookup changelog) spills to local disk
        try (IOManager io = IOManager.create(TMP);
                BatchTableWrite write = builder.newWrite()) {
            write.withIOManager(io);
            for (JsonNode node : nodes) {
                JsonNode kind = node.get("_row_kind");
                GenericRow row = new GenericRow(
                        kind == null ? RowKind.INSERT : RowKind.fromShortString(kind.asText()), fields.size());
                for (int i = 0; i < fields.size(); i++) {
                    row.setField(i, internal(node.get(fields.get(i).name()), fields.get(i).type()));
                }
                write.write(row);
                touched.computeIfAbsent(write.getPartition(row).copy(), p -> new TreeSet<>())
                        .add(write.getBucket(row));
            }
            if (compact) {
                for (Map.Entry<BinaryRow, Set<Integer>> e : touched.entrySet()) {
                    for (int bucket : e.getValue()) {
                        write.compact(e.getKey(), bucket, true);
                    }
                }
            }
            messages = write.prepareCommit();
        }
        return messages;
    }

    private static String commit(String path, String messagesFile, int version, String user, long identifier)
            throws Exception {
        FileStoreTable table = FileStoreTableFactory.create(LocalFileIO.create(), new Path(path));
        byte[] bytes = Files.readAllBytes(Paths.get(messagesFile));
        List<CommitMessage> messages =
                new CommitMessageSerializer().deserializeList(version, new DataInputDeserializer(bytes));
        try (StreamTableCommit commit =
                table.newStreamWriteBuilder().withCommitUser(user).newCommit()) {
            commit.commit(identifier, messages);
        }
        OptionalLong snapshot = table.latestSnapshotId();
        return "{\"snapshot\":" + (snapshot.isPresent() ? Long.toString(snapshot.getAsLong()) : "null")
                + ",\"messages\":" + messages.size() + "}";
    }

    /** A JSON value as Paimon's internal representation of ``type`` (see the header). */
    private static Object internal(JsonNode v, DataType type) {
        if (v == null || v.isNull()) {
            return null;
        }
        switch (type.getTypeRoot().name()) {
            case "BOOLEAN":
                return v.asBoolean();
            case "TINYINT":
                return (byte) v.asInt();
            case "SMALLINT":
                return (short) v.asInt();
            case "INTEGER":
            case "TIME_WITHOUT_TIME_ZONE":
                return v.asInt();
            case "DATE":
                return v.isTextual() ? (int) LocalDate.parse(v.asText()).toEpochDay() : v.asInt();
            case "BIGINT":
                return v.asLong();
            case "FLOAT":
                return v.isTextual() ? Float.parseFloat(v.asText()) : (float) v.asDouble();
            case "DOUBLE":
                return v.isTextual() ? Double.parseDouble(v.asText()) : v.asDouble();
            case "DECIMAL":
                return Decimal.fromBigDecimal(
                        new BigDecimal(v.asText()), DataTypeChecks.getPrecision(type), DataTypeChecks.getScale(type));
            case "CHAR":
            case "VARCHAR":
                return BinaryString.fromString(v.asText());
            case "BINARY":
            case "VARBINARY":
                return Base64.getDecoder().decode(v.asText());
            case "TIMESTAMP_WITHOUT_TIME_ZONE":
            case "TIMESTAMP_WITH_LOCAL_TIME_ZONE":
                if (v.isTextual()) { // "yyyy-MM-ddTHH:mm:ss.nnnnnnnnn": nanosecond precision (LTZ: in UTC)
                    return Timestamp.fromLocalDateTime(LocalDateTime.parse(v.asText()));
                }
                return Timestamp.fromMicros(v.asLong());
            default:
                throw new IllegalArgumentException("the harness cannot write " + type);
        }
    }

    /** The table at path with dynamic options (an object of key -> value; missing: none). */
    private static FileStoreTable openTable(String path, JsonNode options) {
        if (options.isMissingNode() || options.size() == 0) {
            return FileStoreTableFactory.create(LocalFileIO.create(), new Path(path));
        }
        Options all = new Options();
        all.set("path", path);
        options.fields().forEachRemaining(e -> all.set(e.getKey(), e.getValue().asText()));
        return FileStoreTableFactory.create(LocalFileIO.create(), all);
    }

    private static void readTable(String path, List<String> columns, List<String> lines)
            throws Exception {
        readTable(FileStoreTableFactory.create(LocalFileIO.create(), new Path(path)), path, columns, lines);
    }

    private static void readTable(FileStoreTable table, String path, List<String> columns, List<String> lines)
            throws Exception {
        ReadBuilder readBuilder = table.newReadBuilder();
        if (!columns.isEmpty()) {
            int[] projection = new int[columns.size()];
            for (int i = 0; i < projection.length; i++) {
                projection[i] = table.rowType().getFieldIndex(columns.get(i));
                if (projection[i] < 0) {
                    throw new IllegalArgumentException(
                            "no column " + columns.get(i) + " in " + table.rowType());
                }
            }
            readBuilder = readBuilder.withProjection(projection);
        }
        List<DataField> fields = readBuilder.readType().getFields();
        OptionalLong snapshot = table.latestSnapshotId();
        StringBuilder header = new StringBuilder();
        header.append("{\"table\":").append(str(path));
        header.append(",\"snapshot\":").append(snapshot.isPresent() ? Long.toString(snapshot.getAsLong()) : "null");
        header.append(",\"fields\":[");
        for (int i = 0; i < fields.size(); i++) {
            header.append(i == 0 ? "" : ",").append(str(fields.get(i).name()));
        }
        header.append("],\"types\":[");
        for (int i = 0; i < fields.size(); i++) {
            header.append(i == 0 ? "" : ",").append(str(fields.get(i).type().toString()));
        }
        header.append("]}");
        lines.add(header.toString());

        List<Split> splits = readBuilder.newScan().plan().splits();
        try (RecordReader<InternalRow> reader = readBuilder.newRead().createReader(splits)) {
            reader.forEachRemaining(row -> lines.add(rowJson(row, fields)));
        }
    }

    private static String rowJson(InternalRow row, List<DataField> fields) {
        StringBuilder sb = new StringBuilder("{");
        for (int i = 0; i < fields.size(); i++) {
            DataField field = fields.get(i);
            sb.append(i == 0 ? "" : ",").append(str(field.name())).append(':');
            int mark = sb.length();
            try {
                value(sb, row, i, field.type());
            } catch (RuntimeException e) { // one bad value must not hide the rest of the table
                sb.setLength(mark);
                sb.append("{\"java_error\":").append(str(e.toString())).append('}');
            }
        }
        RowKind kind = row.getRowKind();
        if (kind != RowKind.INSERT) {
            sb.append(fields.isEmpty() ? "" : ",").append("\"_row_kind\":").append(str(kind.shortString()));
        }
        return sb.append('}').toString();
    }

    private static void value(StringBuilder sb, DataGetters g, int pos, DataType type) {
        if (g.isNullAt(pos)) {
            sb.append("null");
            return;
        }
        switch (type.getTypeRoot().name()) {
            case "BOOLEAN":
                sb.append(g.getBoolean(pos));
                break;
            case "TINYINT":
                sb.append(g.getByte(pos));
                break;
            case "SMALLINT":
                sb.append(g.getShort(pos));
                break;
            case "INTEGER":
            case "DATE":
            case "TIME_WITHOUT_TIME_ZONE":
                sb.append(g.getInt(pos));
                break;
            case "BIGINT":
                sb.append(g.getLong(pos));
                break;
            case "FLOAT":
                number(sb, (double) g.getFloat(pos));
                break;
            case "DOUBLE":
                number(sb, g.getDouble(pos));
                break;
            case "DECIMAL": {
                Decimal d = g.getDecimal(pos, DataTypeChecks.getPrecision(type), DataTypeChecks.getScale(type));
                sb.append(str(d.toBigDecimal().toPlainString()));
                break;
            }
            case "CHAR":
            case "VARCHAR":
                sb.append(str(g.getString(pos).toString()));
                break;
            case "BINARY":
            case "VARBINARY":
                sb.append(str(Base64.getEncoder().encodeToString(g.getBinary(pos))));
                break;
            case "TIMESTAMP_WITHOUT_TIME_ZONE":
                sb.append(str(timestamp(g.getTimestamp(pos, DataTypeChecks.getPrecision(type)), "")));
                break;
            case "TIMESTAMP_WITH_LOCAL_TIME_ZONE":
                sb.append(str(timestamp(g.getTimestamp(pos, DataTypeChecks.getPrecision(type)), "Z")));
                break;
            case "ARRAY": {
                InternalArray array = g.getArray(pos);
                DataType element = ((ArrayType) type).getElementType();
                sb.append('[');
                for (int i = 0; i < array.size(); i++) {
                    sb.append(i == 0 ? "" : ",");
                    value(sb, array, i, element);
                }
                sb.append(']');
                break;
            }
            case "MAP":
                pairs(sb, g.getMap(pos), ((MapType) type).getKeyType(), ((MapType) type).getValueType());
                break;
            case "MULTISET":
                pairs(sb, g.getMap(pos), ((MultisetType) type).getElementType(), new org.apache.paimon.types.IntType(false));
                break;
            case "ROW": {
                List<DataField> nested = ((RowType) type).getFields();
                InternalRow inner = g.getRow(pos, nested.size());
                sb.append('[');
                for (int i = 0; i < nested.size(); i++) {
                    sb.append(i == 0 ? "" : ",");
                    value(sb, inner, i, nested.get(i).type());
                }
                sb.append(']');
                break;
            }
            default:
                sb.append("{\"unsupported\":").append(str(type.toString())).append('}');
        }
    }

    private static void pairs(StringBuilder sb, InternalMap map, DataType keyType, DataType valueType) {
        InternalArray keys = map.keyArray();
        InternalArray values = map.valueArray();
        sb.append('[');
        for (int i = 0; i < map.size(); i++) {
            sb.append(i == 0 ? "[" : ",[");
            value(sb, keys, i, keyType);
            sb.append(',');
            value(sb, values, i, valueType);
            sb.append(']');
        }
        sb.append(']');
    }

    private static void number(StringBuilder sb, double v) {
        if (Double.isNaN(v)) {
            sb.append("\"NaN\"");
        } else if (Double.isInfinite(v)) {
            sb.append(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        } else {
            sb.append(Double.toString(v));
        }
    }

    /** Epoch millis + nano-of-milli as wall-clock text with 9 fraction digits (no zone applied). */
    static String timestamp(Timestamp ts, String suffix) {
        long millis = ts.getMillisecond();
        long seconds = Math.floorDiv(millis, 1000L);
        int nanos = (int) Math.floorMod(millis, 1000L) * 1_000_000 + ts.getNanoOfMillisecond();
        LocalDateTime ldt = LocalDateTime.ofEpochSecond(seconds, 0, ZoneOffset.UTC);
        return ldt.format(SECONDS) + String.format(".%09d", nanos) + suffix;
    }

    static String str(String s) {
        StringBuilder sb = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                default:
                    if (c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x2028 || c == 0x2029
                            || (c >= 0xD800 && c <= 0xDFFF && !validSurrogate(s, i))) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        return sb.append('"').toString();
    }

    /** True if the surrogate at i is half of a well-formed pair (lone halves are escaped). */
    private static boolean validSurrogate(String s, int i) {
        char c = s.charAt(i);
        if (Character.isHighSurrogate(c)) {
            return i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
        }
        return i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
    }
}
