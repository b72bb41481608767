package lakeflow.flink;

import java.io.IOException;
import java.io.Serializable;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.streaming.api.lineage.DefaultLineageDataset;
import org.apache.flink.streaming.api.lineage.DefaultSourceLineageVertex;
import org.apache.flink.streaming.api.lineage.LineageDatasetFacet;
import org.apache.flink.streaming.api.lineage.LineageVertexProvider;
import org.apache.flink.streaming.api.lineage.SourceLineageVertex;
import org.apache.flink.types.Row;

/**
 * The synthetic sensors: record {@code seq} (0, 1, 2 …, split across the parallel readers of a FLIP-27
 * {@link DataGeneratorSource}) as one JSON document of the declared schema, taken at the time it is made:
 * {@code Row(json)}, as the sink takes it ({@link JsonArrayWriterFactory}).
 *
 * <p>What each field holds comes from a spec that {@code lakeflow/ingest/sensors.py} writes from the
 * schema and its {@code x-lakeflow-generate} hints ({@code Generator.spec}): a node is {@code {"object":
 * [[key, node] …]}} (a struct, a map: {@code key} the member's name as JSON text), {@code {"array": [node
 * …]}}, or a leaf {@code {"kind": <Iceberg kind>, "make": <hint>, …}}. The same records in Python
 * ({@code Generator.record}) are the twin a test compares with. Record {@code seq} belongs to device
 * {@code seq % sensors}; numbers are written fixed-point, rounded half up ({@link FixedDecimal}); strings
 * unescaped (a hint's strings hold no {@code "}, {@code \} or control character: the spec's writer checks).
 *
 * <p>The remaining range of each split is the source's checkpointed state, so after a recovery the
 * sequence continues where the last checkpoint left it, and an unbounded run ({@code count =
 * Long.MAX_VALUE}) costs no more state than a bounded one. For Flink's native lineage (FLIP-314) the
 * source is the dataset {@code lakeflow} / {@code synthetic-sensors}, with the records' declared fields.
 */
public final class SensorRecords implements GeneratorFunction<Long, Row> {

    private static final long serialVersionUID = 1L;

    /** The source's dataset in native lineage: OpenLineage namespace and name. */
    public static final String DATASET_NAMESPACE = "lakeflow";
    public static final String DATASET_NAME = "synthetic-sensors";

    /** {@code ROW<reading STRING>}. */
    public static final TypeInformation<Row> TYPE = Types.ROW_NAMED(new String[] {"reading"}, Types.STRING);

    private static final long DAY_MS = 86_400_000L;

    private final Node root;
    private final long sensors;
    private transient Tick tick;

    /** The records of {@code spec} (see the class comment) from {@code sensors} devices. */
    public SensorRecords(String spec, long sensors) throws IOException {
        if (sensors < 1) {
            throw new IllegalArgumentException("SensorRecords: " + sensors + " sensors");
        }
        this.root = node(new ObjectMapper().readTree(spec));
        this.sensors = sensors;
    }

    @Override
    public Row map(Long seq) {
        return Row.of(record(seq, System.currentTimeMillis()));
    }

    /** Record {@code seq} taken at {@code timestampMs} (epoch milliseconds). */
    public String record(long seq, long timestampMs) {
        if (tick == null) {
            tick = new Tick();
        }
        tick.seq = seq;
        tick.timestampMs = timestampMs;
        tick.device = seq % sensors;
        StringBuilder out = new StringBuilder(256);
        root.write(out, tick);
        return out.toString();
    }

    /**
     * {@code count} records of {@code spec} (use {@link Long#MAX_VALUE} to run forever) at {@code
     * rowsPerSecond} in total over all readers ({@code <= 0}: as fast as possible); native lineage names
     * the declared fields {@code names} of the Flink SQL {@code types}.
     */
    public static DataGeneratorSource<Row> source(String spec, long sensors, long count, double rowsPerSecond,
            String[] names, String[] types) throws IOException {
        RateLimiterStrategy rate = rowsPerSecond > 0
                ? RateLimiterStrategy.perSecond(rowsPerSecond)
                : RateLimiterStrategy.noOp();
        return new Source(new SensorRecords(spec, sensors), count, rate, names, types);
    }

    /** The generator source, naming the synthetic sensors for native lineage. */
    static final class Source extends DataGeneratorSource<Row> implements LineageVertexProvider {
        private static final long serialVersionUID = 1L;
        private final String[] names;
        private final String[] types;

        Source(SensorRecords records, long count, RateLimiterStrategy rate, String[] names, String[] types) {
            super(records, count, rate, TYPE);
            this.names = names.clone();
            this.types = types.clone();
        }

        @Override
        public SourceLineageVertex getLineageVertex() {
            Map<String, LineageDatasetFacet> facets = new LinkedHashMap<>();
            TableLineage.SchemaFacet schema = new TableLineage.SchemaFacet(names, types);
            facets.put(schema.name(), schema);
            return new DefaultSourceLineageVertex(getBoundedness(), Collections.singletonList(
                    new DefaultLineageDataset(DATASET_NAME, DATASET_NAMESPACE, facets)));
        }
    }

    /** What a record's values are made from: its {@code seq}, its time, its device, and a random source. */
    static final class Tick {
        long seq;
        long timestampMs;
        long device;
        final SplittableRandom random = new SplittableRandom();
    }

    /** One value of the record: it writes its JSON text. */
    abstract static class Node implements Serializable {
        private static final long serialVersionUID = 1L;

        abstract void write(StringBuilder out, Tick tick);
    }

    static Node node(JsonNode spec) {
        boolean object = spec.has("object");
        if (object || spec.has("array")) {
            List<String> keys = new ArrayList<>();
            List<Node> values = new ArrayList<>();
            for (JsonNode member : spec.get(object ? "object" : "array")) {
                keys.add(object ? member.get(0).asText() + ':' : "");
                values.add(node(object ? member.get(1) : member));
            }
            return new Members(object ? '{' : '[', object ? '}' : ']', keys.toArray(new String[0]),
                    values.toArray(new Node[0]));
        }
        String kind = spec.get("kind").asText();
        String make = spec.get("make").asText();
        switch (make) {
            case "device":
                return new Device(kind, spec.path("prefix").asText(), spec.get("width").asInt(), maxLength(spec));
            case "constant":
                return new Text(quoted(truncated(spec.get("text").asText(), maxLength(spec))));
            case "sequence":
                return new Sequence(kind, maxLength(spec));
            case "event-time":
                return new EventTime(kind);
            case "daily-cycle":
                return new DailyCycle(kind, spec);
            case "per-device":
                return new PerDevice(kind, spec);
            case "coin":
                return new Coin();
            default:
                throw new IllegalArgumentException("SensorRecords: no generator " + make);
        }
    }

    private static int maxLength(JsonNode spec) {
        JsonNode limit = spec.get("maxLength");
        return limit == null || limit.isNull() ? -1 : limit.asInt();
    }

    /** {@code text}'s first {@code maxLength} characters (code points); all of it when {@code maxLength < 0}. */
    private static String truncated(String text, int maxLength) {
        if (maxLength < 0 || text.codePointCount(0, text.length()) <= maxLength) {
            return text;
        }
        return text.substring(0, text.offsetByCodePoints(0, maxLength));
    }

    private static String quoted(String text) {
        return '"' + text + '"';
    }

    /** An object (each value after its key: {@code "name":}) or an array (no keys). */
    static final class Members extends Node {
        private static final long serialVersionUID = 1L;
        private final char open;
        private final char close;
        private final String[] keys;
        private final Node[] values;

        Members(char open, char close, String[] keys, Node[] values) {
            this.open = open;
            this.close = close;
            this.keys = keys;
            this.values = values;
        }

        @Override
        void write(StringBuilder out, Tick tick) {
            out.append(open);
            for (int i = 0; i < values.length; i++) {
                if (i > 0) {
                    out.append(',');
                }
                out.append(keys[i]);
                values[i].write(out, tick);
            }
            out.append(close);
        }
    }

    /** A constant's JSON text (the run's id). */
    static final class Text extends Node {
        private static final long serialVersionUID = 1L;
        private final String json;

        Text(String json) {
            this.json = json;
        }

        @Override
        void write(StringBuilder out, Tick tick) {
            out.append(json);
        }
    }

    /** The device: a string {@code prefix} + its number from 1, zero-padded to {@code width}; a number: that number. */
    static final class Device extends Node {
        private static final long serialVersionUID = 1L;
        private final boolean text;
        private final String prefix;
        private final int width;
        private final int maxLength;

        Device(String kind, String prefix, int width, int maxLength) {
            this.text = kind.equals("string");
            this.prefix = prefix;
            this.width = width;
            this.maxLength = maxLength;
        }

        @Override
        void write(StringBuilder out, Tick tick) {
            if (!text) {
                out.append(tick.device + 1);
                return;
            }
            String number = Long.toString(tick.device + 1);
            StringBuilder id = new StringBuilder(prefix.length() + Math.max(width, number.length())).append(prefix);
            for (int i = number.length(); i < width; i++) {
                id.append('0');
            }
            id.append(number);
            out.append('"').append(truncated(id.toString(), maxLength)).append('"');
        }
    }

    /** The record's {@code seq}: a long, an int (modulo 2^31) or its decimal text. */
    static final class Sequence extends Node {
        private static final long serialVersionUID = 1L;
        private final String kind;
        private final int maxLength;

        Sequence(String kind, int maxLength) {
            this.kind = kind;
            this.maxLength = maxLength;
        }

        @Override
        void write(StringBuilder out, Tick tick) {
            switch (kind) {
                case "int":
                    out.append(tick.seq % 2147483648L);
                    break;
                case "string":
                    out.append('"').append(truncated(Long.toString(tick.seq), maxLength)).append('"');
                    break;
                default:
                    out.append(tick.seq);
            }
        }
    }

    /** The record's time: epoch milliseconds, a UTC date-time ({@code …Z} for a timestamptz), or its UTC day. */
    static final class EventTime extends Node {
        private static final long serialVersionUID = 1L;
        private static final DateTimeFormatter SECONDS = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss");
        private final String kind;
        private transient long second = Long.MIN_VALUE;
        private transient String secondText;

        EventTime(String kind) {
            this.kind = kind;
        }

        @Override
        void write(StringBuilder out, Tick tick) {
            long ms = tick.timestampMs;
            switch (kind) {
                case "long":
                    out.append(ms);
                    return;
                case "date":
                    out.append('"').append(LocalDate.ofEpochDay(Math.floorDiv(ms, DAY_MS))).append('"');
                    return;
                default:
                    long s = Math.floorDiv(ms, 1000L);
                    if (secondText == null || s != second) {
                        second = s;
                        secondText = LocalDateTime.ofEpochSecond(s, 0, ZoneOffset.UTC).format(SECONDS);
                    }
                    int millis = (int) Math.floorMod(ms, 1000L);
                    out.append('"').append(secondText).append('.');
                    out.append((char) ('0' + millis / 100)).append((char) ('0' + millis / 10 % 10))
                            .append((char) ('0' + millis % 10));
                    out.append(kind.equals("timestamptz") ? "Z\"" : "\"");
            }
        }
    }

    /**
     * A number around the device's baseline {@code low + spread * (device * prime mod 1000) / 1000}: {@code
     * + amplitude * sin(2π · time of day + device)} and {@code + noise * (uniform - 0.5)}, clamped to {@code
     * min} and {@code max}; written with {@code scale} places (an integer: rounded half up; a float: its
     * float value's; a decimal: clamped to {@code ±limit}, its largest value).
     */
    static final class DailyCycle extends Node {
        private static final long serialVersionUID = 1L;
        private final String kind;
        private final double low;
        private final double spread;
        private final long prime;
        private final double amplitude;
        private final double noise;
        private final Double min;
        private final Double max;
        private final int precision;
        private final int scale;
        private final double limit;

        DailyCycle(String kind, JsonNode spec) {
            this.kind = kind;
            this.low = spec.get("low").asDouble();
            this.spread = spec.path("spread").asDouble(0);
            this.prime = spec.path("prime").asLong(1);
            this.amplitude = spec.path("amplitude").asDouble(0);
            this.noise = spec.path("noise").asDouble(0);
            this.min = spec.hasNonNull("min") ? spec.get("min").asDouble() : null;
            this.max = spec.hasNonNull("max") ? spec.get("max").asDouble() : null;
            this.precision = spec.path("precision").asInt(19);
            this.scale = spec.path("scale").asInt(0);
            this.limit = spec.path("limit").asDouble(Double.POSITIVE_INFINITY);
        }

        @Override
        void write(StringBuilder out, Tick tick) {
            double value = low + spread * ((tick.device * prime) % 1000) / 1000.0;
            if (amplitude != 0) {
                double day = 2 * Math.PI * (tick.timestampMs % DAY_MS) / (double) DAY_MS + tick.device;
                value += amplitude * Math.sin(day);
            }
            if (noise != 0) {
                value += noise * (tick.random.nextDouble() - 0.5);
            }
            if (max != null) {
                value = Math.min(max, value);
            }
            if (min != null) {
                value = Math.max(min, value);
            }
            switch (kind) {
                case "float":
                    value = (float) value;
                    break;
                case "decimal":
                    value = Math.max(-limit, Math.min(limit, value));
                    break;
                default:
            }
            out.append(FixedDecimal.format(value, precision, scale));
        }
    }

    /** One of the values, by device: device {@code i} has value {@code i % count}. */
    static final class PerDevice extends Node {
        private static final long serialVersionUID = 1L;
        private final String[] json;

        PerDevice(String kind, JsonNode spec) {
            List<String> texts = new ArrayList<>();
            for (Iterator<JsonNode> it = spec.get("values").elements(); it.hasNext(); ) {
                texts.add(text(kind, it.next().asText(), spec));
            }
            this.json = texts.toArray(new String[0]);
        }

        /** The JSON text of {@code value}, as a field of {@code kind}. */
        private static String text(String kind, String value, JsonNode spec) {
            int scale = spec.path("scale").asInt(0);
            switch (kind) {
                case "string":
                    return quoted(truncated(value, maxLength(spec)));
                case "boolean":
                    return Boolean.toString(Boolean.parseBoolean(value));
                case "long":
                case "int":
                    return new BigDecimal(value).toBigIntegerExact().toString();
                case "decimal":
                    return new BigDecimal(value).setScale(scale, RoundingMode.HALF_UP).toPlainString();
                case "float":
                    return FixedDecimal.format(Float.parseFloat(value), spec.get("precision").asInt(), scale);
                default:
                    return FixedDecimal.format(Double.parseDouble(value), spec.get("precision").asInt(), scale);
            }
        }

        @Override
        void write(StringBuilder out, Tick tick) {
            out.append(json[(int) (tick.device % json.length)]);
        }
    }

    /** true or false, at random. */
    static final class Coin extends Node {
        private static final long serialVersionUID = 1L;

        @Override
        void write(StringBuilder out, Tick tick) {
            out.append(tick.random.nextDouble() < 0.5);
        }
    }
}
