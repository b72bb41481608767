package lakeflow.flink;

import java.io.IOException;
import java.util.Collection;
import java.util.Collections;

import org.apache.flink.api.common.SupportsConcurrentExecutionAttempts;
import org.apache.flink.api.connector.sink2.Committer;
import org.apache.flink.api.connector.sink2.CommitterInitContext;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.StatefulSinkWriter;
import org.apache.flink.api.connector.sink2.SupportsCommitter;
import org.apache.flink.api.connector.sink2.SupportsWriterState;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.connector.file.sink.FileSinkCommittable;
import org.apache.flink.connector.file.sink.writer.FileWriterBucketState;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.streaming.api.connector.sink2.CommittableMessage;
import org.apache.flink.streaming.api.connector.sink2.SupportsPreCommitTopology;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.lineage.LineageVertex;
import org.apache.flink.streaming.api.lineage.LineageVertexProvider;
import org.apache.flink.streaming.api.lineage.DefaultLineageVertex;

/**
 * A {@link FileSink} that tells Flink's native lineage (FLIP-314) which table it writes. Flink's
 * own FileSink is no {@link LineageVertexProvider} (and cannot be subclassed: its constructor is
 * private), so this one implements every interface the FileSink does and hands each call to it:
 * writers, state, committables and the pre-commit topology are the FileSink's own, unchanged; the
 * writer and committer are wrapped to count what they write and commit ({@link SinkMetrics}).
 */
public final class LineageFileSink<IN>
        implements Sink<IN>,
                SupportsWriterState<IN, FileWriterBucketState>,
                SupportsWriterState.WithCompatibleState,
                SupportsCommitter<FileSinkCommittable>,
                SupportsPreCommitTopology<FileSinkCommittable, FileSinkCommittable>,
                SupportsConcurrentExecutionAttempts,
                LineageVertexProvider {

    private static final long serialVersionUID = 1L;

    private final FileSink<IN> sink;
    private final TableLineage table;

    public LineageFileSink(FileSink<IN> sink, TableLineage table) {
        this.sink = sink;
        this.table = table;
    }

    @Override
    public LineageVertex getLineageVertex() {
        return new DefaultLineageVertex(Collections.singletonList(table.dataset()));
    }

    @Override
    public StatefulSinkWriter<IN, FileWriterBucketState> createWriter(WriterInitContext context)
            throws IOException {
        return new SinkMetrics.Writer<>(sink.createWriter(context), context.metricGroup());
    }

    @Override
    public StatefulSinkWriter<IN, FileWriterBucketState> restoreWriter(
            WriterInitContext context, Collection<FileWriterBucketState> recoveredState) throws IOException {
        return new SinkMetrics.Writer<>(sink.restoreWriter(context, recoveredState), context.metricGroup());
    }

    @Override
    public SimpleVersionedSerializer<FileWriterBucketState> getWriterStateSerializer() {
        return sink.getWriterStateSerializer();
    }

    @Override
    public Collection<String> getCompatibleWriterStateNames() {
        return sink.getCompatibleWriterStateNames();
    }

    @Override
    public Committer<FileSinkCommittable> createCommitter(CommitterInitContext context) throws IOException {
        return new SinkMetrics.CountingCommitter(sink.createCommitter(context), context.metricGroup());
    }

    @Override
    public SimpleVersionedSerializer<FileSinkCommittable> getCommittableSerializer() {
        return sink.getCommittableSerializer();
    }

    @Override
    public DataStream<CommittableMessage<FileSinkCommittable>> addPreCommitTopology(
            DataStream<CommittableMessage<FileSinkCommittable>> committables) {
        return sink.addPreCommitTopology(committables);
    }

    @Override
    public SimpleVersionedSerializer<FileSinkCommittable> getWriteResultSerializer() {
        return sink.getWriteResultSerializer();
    }
}
