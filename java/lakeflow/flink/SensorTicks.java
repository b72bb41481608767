package lakeflow.flink;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.streaming.api.lineage.DefaultLineageDataset;
import org.apache.flink.streaming.api.lineage.DefaultSourceLineageVertex;
import org.apache.flink.streaming.api.lineage.LineageDatasetFacet;
import org.apache.flink.streaming.api.lineage.LineageVertexProvider;
import org.apache.flink.streaming.api.lineage.SourceLineageVertex;
import org.apache.flink.types.Row;

/**
 * The clock of the synthetic sensors: a FLIP-27 {@link DataGeneratorSource} emitting
 * {@code (seq, timestamp_ms)} rows, {@code seq} = 0, 1, 2, … split across the parallel readers.
 *
 * <p>The remaining range of each split is the source's checkpointed state, so after a recovery
 * the sequence continues where the last checkpoint left it (never restarts), and an unbounded
 * run ({@code count = Long.MAX_VALUE}) costs no more state than a bounded one. The readings
 * themselves are built from these two fields in SQL.
 *
 * <p>For Flink's native lineage (FLIP-314) the source is the dataset {@code lakeflow} /
 * {@code synthetic-sensors}, with the ticks' schema.
 */
public final class SensorTicks implements GeneratorFunction<Long, Row> {

    private static final long serialVersionUID = 1L;

    /** The source's dataset in native lineage: OpenLineage namespace and name. */
    public static final String DATASET_NAMESPACE = "lakeflow";
    public static final String DATASET_NAME = "synthetic-sensors";

    /** {@code ROW<seq BIGINT, timestamp_ms BIGINT>}. */
    public static final TypeInformation<Row> TYPE =
            Types.ROW_NAMED(new String[] {"seq", "timestamp_ms"}, Types.LONG, Types.LONG);

    @Override
    public Row map(Long seq) {
        return Row.of(seq, System.currentTimeMillis());
    }

    /**
     * {@code count} ticks (use {@link Long#MAX_VALUE} to run forever) at {@code rowsPerSecond}
     * in total over all readers; {@code rowsPerSecond <= 0} means as fast as possible.
     */
    public static DataGeneratorSource<Row> source(long count, double rowsPerSecond) {
        RateLimiterStrategy rate = rowsPerSecond > 0
                ? RateLimiterStrategy.perSecond(rowsPerSecond)
                : RateLimiterStrategy.noOp();
        return new Source(count, rate);
    }

    /** The generator source, naming the synthetic sensors for native lineage. */
    static final class Source extends DataGeneratorSource<Row> implements LineageVertexProvider {
        private static final long serialVersionUID = 1L;

        Source(long count, RateLimiterStrategy rate) {
            super(new SensorTicks(), count, rate, TYPE);
        }

        @Override
        public SourceLineageVertex getLineageVertex() {
            Map<String, LineageDatasetFacet> facets = new LinkedHashMap<>();
            TableLineage.SchemaFacet schema = new TableLineage.SchemaFacet(
                    new String[] {"seq", "timestamp_ms"}, new String[] {"BIGINT", "BIGINT"});
            facets.put(schema.name(), schema);
            return new DefaultSourceLineageVertex(getBoundedness(), Collections.singletonList(
                    new DefaultLineageDataset(DATASET_NAME, DATASET_NAMESPACE, facets)));
        }
    }
}
