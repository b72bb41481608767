package lakeflow.flink;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.types.Row;

/**
 * The clock of the synthetic sensors: a FLIP-27 {@link DataGeneratorSource} emitting
 * {@code (seq, timestamp_ms)} rows, {@code seq} = 0, 1, 2, … split across the parallel readers.
 *
 * <p>The remaining range of each split is the source's checkpointed state, so after a recovery
 * the sequence continues where the last checkpoint left it (never restarts), and an unbounded
 * run ({@code count = Long.MAX_VALUE}) costs no more state than a bounded one. The readings
 * themselves are built from these two fields in SQL.
 */
public final class SensorTicks implements GeneratorFunction<Long, Row> {

    private static final long serialVersionUID = 1L;

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
        return new DataGeneratorSource<>(new SensorTicks(), count, rate, TYPE);
    }
}
