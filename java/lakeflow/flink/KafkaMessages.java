package lakeflow.flink;

import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.KafkaSourceBuilder;
import org.apache.flink.connector.kafka.source.enumerator.KafkaSourceEnumState;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.connector.kafka.source.split.KafkaPartitionSplit;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.admin.AdminClient;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;

/**
 * The ingestion job's Kafka source: Flink's own {@link KafkaSource} (flink-sql-connector-kafka,
 * whose Kafka client is shaded; compiled against it, loaded only by a job with SOURCE=kafka) on
 * every stream's topics, each message as {@code Row(topic, partition, offset, payload bytes)}, what
 * {@link StreamRouter} routes and validates.
 *
 * <p>The group's offsets are committed on every checkpoint (the connector's default); the end
 * offsets of a bounded source synchronously besides ({@link EndOffsetCommits}), so the next run
 * starts where this one ended. As a
 * DataStream source it declares its topic to Flink's native lineage (FLIP-314) the way the
 * connector does: namespace {@code kafka://<first bootstrap server>}, name each topic — OpenLineage's
 * naming of a Kafka dataset, which the job's parameters declare too.
 */
public final class KafkaMessages implements KafkaRecordDeserializationSchema<Row> {

    private static final long serialVersionUID = 1L;

    /** {@code ROW<topic STRING, partition INT, offset BIGINT, payload BYTES>}. */
    public static final TypeInformation<Row> TYPE = Types.ROW_NAMED(
            new String[] {"topic", "partition", "offset", "payload"},
            Types.STRING, Types.INT, Types.LONG, Types.PRIMITIVE_ARRAY(Types.BYTE));

    @Override
    public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Row> out) {
        out.collect(Row.of(record.topic(), record.partition(), record.offset(), record.value()));
    }

    @Override
    public TypeInformation<Row> getProducedType() {
        return TYPE;
    }

    /**
     * The source of {@code topics} on {@code servers} for consumer group {@code groupId}.
     *
     * @param startingOffsets {@code committed} (the group's offsets, else {@code offsetReset}),
     *     {@code earliest} or {@code latest}: where a job not restored from a checkpoint starts
     * @param offsetReset {@code earliest} or {@code latest}
     * @param stopAtLatest a bounded source, ending at the offsets present when it starts
     * @param properties further Kafka client properties (security); secrets included, so never log them
     */
    public static Source<Row, KafkaPartitionSplit, KafkaSourceEnumState> source(String servers, String[] topics, String groupId, String startingOffsets,
            String offsetReset, boolean stopAtLatest, Map<String, String> properties) {
        Properties client = new Properties();
        client.putAll(properties);
        KafkaSourceBuilder<Row> builder = KafkaSource.<Row>builder()
                .setBootstrapServers(servers)
                .setTopics(topics)
                .setGroupId(groupId)
                .setProperties(client)
                .setStartingOffsets(startingOffsets(startingOffsets, offsetReset))
                .setDeserializer(new KafkaMessages());
        if (stopAtLatest) {
            builder.setBounded(OffsetsInitializer.latest());
        }
        Properties group = new Properties();
        group.putAll(client);
        group.put("bootstrap.servers", servers);
        group.put("group.id", groupId);
        return new EndOffsetCommits(builder.build(), group);
    }

    /**
     * The topics on {@code servers} (internal ones left out), for a topic pattern's streams.
     *
     * @param properties further Kafka client properties (security); secrets included, so never log them
     */
    public static String[] topics(String servers, Map<String, String> properties) throws Exception {
        Properties client = new Properties();
        client.putAll(properties);
        client.put("bootstrap.servers", servers);
        try (AdminClient admin = AdminClient.create(client)) {
            return admin.listTopics().names().get(60, TimeUnit.SECONDS).stream().sorted().toArray(String[]::new);
        }
    }

    static OffsetsInitializer startingOffsets(String startingOffsets, String offsetReset) {
        switch (startingOffsets) {
            case "committed":
                return OffsetsInitializer.committedOffsets(
                        OffsetResetStrategy.valueOf(offsetReset.toUpperCase(Locale.ROOT)));
            case "earliest":
                return OffsetsInitializer.earliest();
            case "latest":
                return OffsetsInitializer.latest();
            default:
                throw new IllegalArgumentException("KafkaMessages: unknown starting offsets " + startingOffsets);
        }
    }
}
