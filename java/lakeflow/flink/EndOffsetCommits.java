package lakeflow.flink;

import java.io.IOException;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceEvent;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.KafkaSourceEnumState;
import org.apache.flink.connector.kafka.source.split.KafkaPartitionSplit;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.TopicPartition;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.flink.streaming.api.lineage.LineageVertex;
import org.apache.flink.streaming.api.lineage.LineageVertexProvider;
import org.apache.flink.types.Row;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Flink's {@link KafkaSource} whose readers commit the end offset of each bounded split to the
 * group synchronously, once the checkpoint taken after the split ended completes.
 *
 * <p>The connector commits asynchronously, through a task queued on its fetcher; when a bounded
 * job ends, the reader closes right after the final checkpoint's notification and that queued
 * commit is dropped now and then, so the next run of the group read a partition again from its
 * previous offsets (seen once in three CI runs). A split's end is its stopping offset, which the
 * enumerator resolves before assigning it; by the time the checkpoint completes, the sink has
 * committed every message before it. Unbounded splits never end and are left to the connector.
 */
final class EndOffsetCommits implements Source<Row, KafkaPartitionSplit, KafkaSourceEnumState>,
        ResultTypeQueryable<Row>, LineageVertexProvider {

    private static final long serialVersionUID = 1L;

    private final KafkaSource<Row> kafka;
    private final Properties client;

    /** @param client the group's consumer properties: servers, group id, security (secrets: never log them) */
    EndOffsetCommits(KafkaSource<Row> kafka, Properties client) {
        this.kafka = kafka;
        this.client = client;
    }

    @Override
    public Boundedness getBoundedness() {
        return kafka.getBoundedness();
    }

    @Override
    public SourceReader<Row, KafkaPartitionSplit> createReader(SourceReaderContext context) throws Exception {
        return new Reader(kafka.createReader(context), client);
    }

    @Override
    public SplitEnumerator<KafkaPartitionSplit, KafkaSourceEnumState> createEnumerator(
            SplitEnumeratorContext<KafkaPartitionSplit> context) {
        return kafka.createEnumerator(context);
    }

    @Override
    public SplitEnumerator<KafkaPartitionSplit, KafkaSourceEnumState> restoreEnumerator(
            SplitEnumeratorContext<KafkaPartitionSplit> context, KafkaSourceEnumState state) throws IOException {
        return kafka.restoreEnumerator(context, state);
    }

    @Override
    public SimpleVersionedSerializer<KafkaPartitionSplit> getSplitSerializer() {
        return kafka.getSplitSerializer();
    }

    @Override
    public SimpleVersionedSerializer<KafkaSourceEnumState> getEnumeratorCheckpointSerializer() {
        return kafka.getEnumeratorCheckpointSerializer();
    }

    @Override
    public TypeInformation<Row> getProducedType() {
        return kafka.getProducedType();
    }

    @Override
    public LineageVertex getLineageVertex() {
        return kafka.getLineageVertex();
    }

    /** The connector's reader; it notes which bounded splits each checkpoint saw ended. */
    static final class Reader implements SourceReader<Row, KafkaPartitionSplit> {

        private static final Logger LOG = LoggerFactory.getLogger(EndOffsetCommits.class);

        private final SourceReader<Row, KafkaPartitionSplit> reader;
        private final Properties client;
        /** Bounded splits assigned and not yet seen ended, by split id. */
        private final Map<String, KafkaPartitionSplit> running = new HashMap<>();
        /** Checkpoint id → the end offsets of the splits it saw ended first. */
        private final SortedMap<Long, Map<TopicPartition, OffsetAndMetadata>> endedAt = new TreeMap<>();

        Reader(SourceReader<Row, KafkaPartitionSplit> reader, Properties client) {
            this.reader = reader;
            this.client = client;
        }

        @Override
        public void addSplits(List<KafkaPartitionSplit> splits) {
            for (KafkaPartitionSplit split : splits) {
                split.getStoppingOffset().filter(offset -> offset >= 0).ifPresent(
                        offset -> running.put(split.splitId(), split));
            }
            reader.addSplits(splits);
        }

        @Override
        public List<KafkaPartitionSplit> snapshotState(long checkpointId) {
            List<KafkaPartitionSplit> splits = reader.snapshotState(checkpointId);
            Set<String> stillRunning = new HashSet<>();
            splits.forEach(split -> stillRunning.add(split.splitId()));
            Map<TopicPartition, OffsetAndMetadata> ended = new HashMap<>();
            running.values().removeIf(split -> {
                if (stillRunning.contains(split.splitId())) {
                    return false;
                }
                ended.put(split.getTopicPartition(), new OffsetAndMetadata(split.getStoppingOffset().get()));
                return true;
            });
            if (!ended.isEmpty()) {
                endedAt.put(checkpointId, ended);
            }
            return splits;
        }

        @Override
        public void notifyCheckpointComplete(long checkpointId) throws Exception {
            reader.notifyCheckpointComplete(checkpointId);
            SortedMap<Long, Map<TopicPartition, OffsetAndMetadata>> done = endedAt.headMap(checkpointId + 1);
            if (done.isEmpty()) {
                return;
            }
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            done.values().forEach(offsets::putAll);
            done.clear();
            Properties properties = new Properties();
            properties.putAll(client);
            properties.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            properties.put(ConsumerConfig.CLIENT_ID_CONFIG, "lakeflow-end-offsets");
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                    properties, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                consumer.commitSync(offsets, Duration.ofSeconds(30));
                LOG.info("committed the end offsets of ended splits: {}", offsets);
            } catch (RuntimeException e) {
                // The next run of the group reads these partitions again from before: duplicates, nothing lost.
                LOG.warn("could not commit the end offsets {} of ended splits: {}", offsets, e.toString());
            }
        }

        @Override
        public void start() {
            reader.start();
        }

        @Override
        public InputStatus pollNext(ReaderOutput<Row> output) throws Exception {
            return reader.pollNext(output);
        }

        @Override
        public CompletableFuture<Void> isAvailable() {
            return reader.isAvailable();
        }

        @Override
        public void notifyNoMoreSplits() {
            reader.notifyNoMoreSplits();
        }

        @Override
        public void handleSourceEvents(SourceEvent event) {
            reader.handleSourceEvents(event);
        }

        @Override
        public void pauseOrResumeSplits(Collection<String> pause, Collection<String> resume) {
            reader.pauseOrResumeSplits(pause, resume);
        }

        @Override
        public void notifyCheckpointAborted(long checkpointId) throws Exception {
            reader.notifyCheckpointAborted(checkpointId);
        }

        @Override
        public void close() throws Exception {
            reader.close();
        }
    }
}
