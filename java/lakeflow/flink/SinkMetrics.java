package lakeflow.flink;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.connector.sink2.Committer;
import org.apache.flink.api.connector.sink2.CommittingSinkWriter;
import org.apache.flink.api.connector.sink2.StatefulSinkWriter;
import org.apache.flink.connector.file.sink.FileSinkCommittable;
import org.apache.flink.connector.file.sink.writer.FileWriterBucketState;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;

/**
 * The ingestion job's own metrics, in the group {@code lakeflow} of the sink's writer and committer
 * operators (Flink's Prometheus reporter names them
 * {@code flink_taskmanager_job_task_operator_lakeflow_<name>}; docs/operations.md):
 *
 * <ul>
 *   <li>{@code readingsWritten} (counter): readings the writer put into part files;
 *   <li>{@code readingsPerPartFile} (gauge): readings per part file of the writer's last checkpoint
 *       that produced files (0 until one did);
 *   <li>{@code partFilesCommitted} (counter): part files the committer made visible;
 *   <li>{@code lastCommitTimestamp} (gauge, epoch ms): when it last committed a part file (0: never).
 * </ul>
 *
 * The FileSink's writer and committer do all the work; these wrappers only count.
 */
final class SinkMetrics {

    static final String GROUP = "lakeflow";

    private SinkMetrics() {}

    /** The FileSink's writer, counting what it writes and prepares for commit. */
    static final class Writer<IN>
            implements StatefulSinkWriter<IN, FileWriterBucketState>,
                    CommittingSinkWriter<IN, FileSinkCommittable> {

        private final StatefulSinkWriter<IN, FileWriterBucketState> writer;
        private final Counter written;
        private long sinceLastCommit;
        private volatile long perFile;

        @SuppressWarnings("unchecked")
        Writer(StatefulSinkWriter<IN, FileWriterBucketState> writer, MetricGroup metrics) {
            if (!(writer instanceof CommittingSinkWriter)) {
                throw new IllegalArgumentException("not a committing writer: " + writer.getClass().getName());
            }
            this.writer = writer;
            MetricGroup group = metrics.addGroup(GROUP);
            this.written = group.counter("readingsWritten");
            group.gauge("readingsPerPartFile", () -> perFile);
        }

        @Override
        public void write(IN element, Context context) throws IOException, InterruptedException {
            writer.write(element, context);
            written.inc();
            sinceLastCommit++;
        }

        @Override
        public void flush(boolean endOfInput) throws IOException, InterruptedException {
            writer.flush(endOfInput);
        }

        @Override
        public void writeWatermark(Watermark watermark) throws IOException, InterruptedException {
            writer.writeWatermark(watermark);
        }

        @Override
        @SuppressWarnings("unchecked")
        public Collection<FileSinkCommittable> prepareCommit() throws IOException, InterruptedException {
            Collection<FileSinkCommittable> committables =
                    ((CommittingSinkWriter<IN, FileSinkCommittable>) writer).prepareCommit();
            long files = committables.stream().filter(FileSinkCommittable::hasPendingFile).count();
            if (files > 0) {
                perFile = sinceLastCommit / files;
                sinceLastCommit = 0;
            }
            return committables;
        }

        @Override
        public List<FileWriterBucketState> snapshotState(long checkpointId) throws IOException {
            return writer.snapshotState(checkpointId);
        }

        @Override
        public void close() throws Exception {
            writer.close();
        }
    }

    /** The FileSink's committer, counting the part files it commits. */
    static final class CountingCommitter implements Committer<FileSinkCommittable> {

        private final Committer<FileSinkCommittable> committer;
        private final Counter committed;
        private volatile long lastCommitMs;

        CountingCommitter(Committer<FileSinkCommittable> committer, MetricGroup metrics) {
            this.committer = committer;
            MetricGroup group = metrics.addGroup(GROUP);
            this.committed = group.counter("partFilesCommitted");
            group.gauge("lastCommitTimestamp", () -> lastCommitMs);
        }

        @Override
        public void commit(Collection<CommitRequest<FileSinkCommittable>> requests)
                throws IOException, InterruptedException {
            List<CommitRequest<FileSinkCommittable>> files = new ArrayList<>();
            for (CommitRequest<FileSinkCommittable> request : requests) {
                if (request.getCommittable().hasPendingFile()) {
                    files.add(request);
                }
            }
            committer.commit(requests);
            if (!files.isEmpty()) {
                committed.inc(files.size());
                lastCommitMs = System.currentTimeMillis();
            }
        }

        @Override
        public void close() throws Exception {
            committer.close();
        }
    }
}
