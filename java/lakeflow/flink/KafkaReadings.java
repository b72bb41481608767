package lakeflow.flink;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.metrics.Counter;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonProcessingException;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.DeserializationFeature;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * Validates Kafka messages as readings, on the JVM: each input row is
 * {@code (topic, partition, offset, payload bytes)} (the job's {@code kafka} table); a message
 * that is a reading comes out as {@code Row(json)}, the reading re-written with exactly the
 * reading's fields in their order; any other message goes to the {@link #DEAD_LETTERS} side
 * output as {@code Row(json)} of {@code {"reason", "topic", "partition", "offset", "payload"}}
 * ({@code payload_base64} instead of {@code payload} when the bytes are not UTF-8). Nothing is
 * dropped and nothing fails the job.
 *
 * <p>A reading is a JSON object of at most {@code maxBytes} bytes holding every field of the
 * schema (other fields are left out) with its JSON type: {@code string}, {@code integer} (a
 * 64-bit integer) or {@code number} (finite). Counted in the operator's metrics as
 * {@code readingsValid} and {@code deadLetters}.
 */
public final class KafkaReadings extends ProcessFunction<Row, Row> {

    private static final long serialVersionUID = 1L;

    /** The dead letters: {@code Row(json)}. */
    public static final OutputTag<Row> DEAD_LETTERS =
            new OutputTag<>("dead-letters", Types.ROW_NAMED(new String[] {"dead_letter"}, Types.STRING));

    /** {@code ROW<reading STRING>}: one JSON document per row, what the JSON-array sink writes. */
    public static final TypeInformation<Row> JSON = Types.ROW_NAMED(new String[] {"reading"}, Types.STRING);

    /** Strict: one JSON value per message (no trailing data), no duplicate keys. */
    private static final ObjectMapper MAPPER = new ObjectMapper()
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION);

    private final String[] names;
    private final String[] kinds;
    private final int maxBytes;
    private transient Counter valid;
    private transient Counter deadLetters;

    /**
     * @param names the reading's fields, in the order written
     * @param kinds each field's JSON type: {@code string}, {@code integer} or {@code number}
     * @param maxBytes the largest message accepted
     */
    public KafkaReadings(String[] names, String[] kinds, int maxBytes) {
        if (names.length != kinds.length) {
            throw new IllegalArgumentException("KafkaReadings: " + names.length + " names, " + kinds.length + " kinds");
        }
        for (String kind : kinds) {
            if (!kind.equals("string") && !kind.equals("integer") && !kind.equals("number")) {
                throw new IllegalArgumentException("KafkaReadings: unknown kind " + kind);
            }
        }
        this.names = names.clone();
        this.kinds = kinds.clone();
        this.maxBytes = maxBytes;
    }

    /** The valid readings of {@code messages}; their dead letters are its {@link #DEAD_LETTERS} side output. */
    public static SingleOutputStreamOperator<Row> validate(
            DataStream<Row> messages, String[] names, String[] kinds, int maxBytes) {
        return messages.process(new KafkaReadings(names, kinds, maxBytes), JSON)
                .name("ValidateReadings")
                .uid("validate-readings");
    }

    /** The dead letters of an operator made by {@link #validate}. */
    public static DataStream<Row> deadLetters(SingleOutputStreamOperator<Row> validated) {
        return validated.getSideOutput(DEAD_LETTERS);
    }

    @Override
    public void open(OpenContext context) {
        valid = getRuntimeContext().getMetricGroup().counter("readingsValid");
        deadLetters = getRuntimeContext().getMetricGroup().counter("deadLetters");
    }

    @Override
    public void processElement(Row message, Context ctx, Collector<Row> out) throws IOException {
        byte[] payload = (byte[]) message.getField(3);
        String reason;
        try {
            out.collect(Row.of(reading(payload)));
            valid.inc();
            return;
        } catch (Invalid exc) {
            reason = exc.getMessage();
        }
        ctx.output(DEAD_LETTERS, Row.of(deadLetter(reason, message, payload)));
        deadLetters.inc();
    }

    /** The reading in {@code payload}, re-written with the schema's fields only. */
    String reading(byte[] payload) throws IOException {
        if (payload == null) {
            throw new Invalid("no value (a tombstone)");
        }
        if (payload.length > maxBytes) {
            throw new Invalid("too large: " + payload.length + " bytes, more than " + maxBytes);
        }
        JsonNode root;
        try {
            root = MAPPER.readTree(payload);
        } catch (JsonProcessingException exc) {
            throw new Invalid("not JSON: " + exc.getOriginalMessage());
        }
        if (root == null || !root.isObject()) {
            throw new Invalid("not a JSON object" + (root == null ? " (empty)" : ": " + kind(root)));
        }
        ObjectNode reading = MAPPER.createObjectNode();
        for (int i = 0; i < names.length; i++) {
            JsonNode value = root.get(names[i]);
            if (value == null || value.isNull()) {
                throw new Invalid("missing field " + names[i]);
            }
            if (!fits(value, kinds[i])) {
                throw new Invalid("field " + names[i] + ": expected " + article(kinds[i]) + ", got " + kind(value));
            }
            reading.set(names[i], value);
        }
        return MAPPER.writeValueAsString(reading);
    }

    private static boolean fits(JsonNode value, String expected) {
        switch (expected) {
            case "string":
                return value.isTextual();
            case "integer":
                return value.isIntegralNumber() && value.canConvertToLong();
            default:
                return value.isNumber() && Double.isFinite(value.doubleValue());
        }
    }

    private static String article(String kind) {
        return kind.equals("integer") ? "an integer" : "a " + kind;
    }

    private static String kind(JsonNode value) {
        if (value.isTextual()) {
            return "a string";
        }
        if (value.isIntegralNumber()) {
            return value.canConvertToLong() ? "an integer" : "an integer beyond 64 bits";
        }
        if (value.isNumber()) {
            return "a number";
        }
        if (value.isBoolean()) {
            return "a boolean";
        }
        return value.isArray() ? "an array" : "an object";
    }

    private static String deadLetter(String reason, Row message, byte[] payload) throws IOException {
        ObjectNode letter = MAPPER.createObjectNode();
        letter.put("reason", reason);
        letter.put("topic", (String) message.getField(0));
        letter.put("partition", (Integer) message.getField(1));
        letter.put("offset", (Long) message.getField(2));
        if (payload == null) {
            letter.putNull("payload");
        } else {
            try {
                letter.put("payload", StandardCharsets.UTF_8.newDecoder()
                        .onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT)
                        .decode(ByteBuffer.wrap(payload)).toString());
            } catch (CharacterCodingException exc) {
                letter.put("payload_base64", Base64.getEncoder().encodeToString(payload));
            }
        }
        return MAPPER.writeValueAsString(letter);
    }

    /** A message that is not a reading; the message is the reason. */
    static final class Invalid extends IOException {
        private static final long serialVersionUID = 1L;

        Invalid(String reason) {
            super(reason);
        }
    }
}
