package lakeflow.flink;

import java.io.IOException;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonParser;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.JsonProcessingException;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.DeserializationFeature;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.JsonNodeFactory;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.types.Row;

import lakeflow.flink.RecordContract.Invalid;


/**
 * Validates Kafka messages against one table's record contract, on the JVM ({@link StreamRouter}
 * holds one per table): a message that is a record comes out whole as {@link #record}'s JSON — undeclared fields included —
 * re-written compactly on one line, every number as sent (integers of any size, decimals exact:
 * {@code 5.0} stays {@code 5.0}); any other message becomes a dead letter ({@link #deadLetter}):
 * {@code {"reason", "topic", "partition", "offset", "payload"}} ({@code payload_base64} instead of
 * {@code payload} when the bytes are not UTF-8). Nothing is dropped and nothing fails the job.
 *
 * <p>A record is a JSON object of at most {@code maxBytes} bytes (no trailing data, no duplicate
 * key) that fits the {@link RecordContract} (its reasons are lakeflow/schema/records.py's).
 */
public final class KafkaReadings implements Serializable {

    private static final long serialVersionUID = 1L;

    /** {@code ROW<reading STRING>}: one JSON document per row, what the JSON-array sink writes. */
    public static final TypeInformation<Row> JSON = Types.ROW_NAMED(new String[] {"reading"}, Types.STRING);

    /** A dead letter: {@code ROW<dead_letter STRING>}. */
    public static final TypeInformation<Row> DEAD_LETTER = Types.ROW_NAMED(new String[] {"dead_letter"}, Types.STRING);

    /** Strict (one JSON value per message, no duplicate keys) and exact (numbers as written). */
    private static final ObjectMapper MAPPER = new ObjectMapper()
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
            .setNodeFactory(JsonNodeFactory.withExactBigDecimals(true));

    private final RecordContract contract;
    private final int maxBytes;

    /**
     * @param contract the record contract's JSON ({@code TableSchema.contract_json()})
     * @param maxBytes the largest message accepted
     */
    public KafkaReadings(String contract, int maxBytes) {
        this.contract = new RecordContract(contract);
        this.maxBytes = maxBytes;
    }

    /** The record in {@code payload}, re-written whole on one line; Invalid with the reason otherwise. */
    public String record(byte[] payload) throws IOException {
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
        if (root == null || root.isMissingNode()) {
            throw new Invalid("not a JSON object (empty)");
        }
        if (!root.isObject()) {
            throw new Invalid("not a JSON object: " + RecordContract.got(root));
        }
        contract.check(root);
        return MAPPER.writeValueAsString(root);
    }

    /** The dead letter of {@code message} ({@code (topic, partition, offset, payload)}) refused for {@code reason}. */
    static String deadLetter(String reason, Row message, byte[] payload) throws IOException {
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
}
