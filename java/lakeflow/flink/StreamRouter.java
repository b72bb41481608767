package lakeflow.flink;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

import lakeflow.flink.RecordContract.Invalid;

/**
 * The ingestion job's one validating operator for every stream: each Kafka message
 * ({@code (topic, partition, offset, payload bytes)}, what {@link KafkaMessages} reads) goes to the
 * table its topic belongs to, is checked against that table's contract ({@link KafkaReadings}) and
 * comes out on that table's side output: {@link #readings} for a record (its JSON), {@link #deadLetters}
 * for anything else (the dead letter with its reason). Nothing is dropped and nothing fails the job.
 * Counted per table, in the operator's metric group {@code table.<name>}, as {@code readingsValid}
 * and {@code deadLetters}.
 */
public final class StreamRouter extends ProcessFunction<Row, Row> {

    private static final long serialVersionUID = 1L;

    private final Map<String, Integer> tableOfTopic;
    private final String[] tables;
    private final KafkaReadings[] contracts;
    private transient OutputTag<Row>[] valid;
    private transient OutputTag<Row>[] rejected;
    private transient Counter[] validCount;
    private transient Counter[] deadCount;

    /**
     * @param topics every topic the job reads
     * @param tableOfTopics for each topic, the index of its table in {@code tables}
     * @param tables the tables' names (their metric groups)
     * @param contracts each table's record contract as JSON ({@code TableSchema.contract_json()})
     * @param maxBytes the largest message accepted
     */
    public StreamRouter(String[] topics, int[] tableOfTopics, String[] tables, String[] contracts, int maxBytes) {
        if (topics.length != tableOfTopics.length || tables.length != contracts.length) {
            throw new IllegalArgumentException("StreamRouter: one table per topic, one contract per table");
        }
        this.tableOfTopic = new HashMap<>();
        for (int i = 0; i < topics.length; i++) {
            tableOfTopic.put(topics[i], tableOfTopics[i]);
        }
        this.tables = tables.clone();
        this.contracts = new KafkaReadings[contracts.length];
        for (int i = 0; i < contracts.length; i++) {
            this.contracts[i] = new KafkaReadings(contracts[i], maxBytes);
        }
    }

    /** Table {@code i}'s records: {@code Row(json)}. */
    public static OutputTag<Row> readings(int i) {
        return new OutputTag<>("readings-" + i, KafkaReadings.JSON);
    }

    /** Table {@code i}'s dead letters: {@code Row(json)}. */
    public static OutputTag<Row> deadLetters(int i) {
        return new OutputTag<>("dead-letters-" + i, KafkaReadings.DEAD_LETTER);
    }

    /** The routing operator over {@code messages}; each table's outputs are its side outputs. */
    public static SingleOutputStreamOperator<Row> route(DataStream<Row> messages, String[] topics, int[] tableOfTopics,
            String[] tables, String[] contracts, int maxBytes) {
        return messages.process(new StreamRouter(topics, tableOfTopics, tables, contracts, maxBytes), KafkaReadings.JSON)
                .name("ValidateReadings")
                .uid("validate-readings");
    }

    /** Table {@code i}'s records, of an operator made by {@link #route}. */
    public static DataStream<Row> readingsOf(SingleOutputStreamOperator<Row> routed, int i) {
        return routed.getSideOutput(readings(i));
    }

    /** Table {@code i}'s dead letters, of an operator made by {@link #route}. */
    public static DataStream<Row> deadLettersOf(SingleOutputStreamOperator<Row> routed, int i) {
        return routed.getSideOutput(deadLetters(i));
    }

    @Override
    @SuppressWarnings("unchecked")
    public void open(OpenContext context) {
        int n = tables.length;
        valid = new OutputTag[n];
        rejected = new OutputTag[n];
        validCount = new Counter[n];
        deadCount = new Counter[n];
        for (int i = 0; i < n; i++) {
            valid[i] = readings(i);
            rejected[i] = deadLetters(i);
            MetricGroup group = getRuntimeContext().getMetricGroup().addGroup("table", tables[i]);
            validCount[i] = group.counter("readingsValid");
            deadCount[i] = group.counter("deadLetters");
        }
    }

    @Override
    public void processElement(Row message, Context ctx, Collector<Row> out) throws IOException {
        String topic = (String) message.getField(0);
        Integer table = tableOfTopic.get(topic);
        if (table == null) {  // the source reads only the topics given: a bug, not a message to drop
            throw new IllegalStateException("StreamRouter: a message of topic " + topic + ", which no stream reads");
        }
        byte[] payload = (byte[]) message.getField(3);
        String reason;
        try {
            ctx.output(valid[table], Row.of(contracts[table].record(payload)));
            validCount[table].inc();
            return;
        } catch (Invalid exc) {
            reason = exc.getMessage();
        }
        ctx.output(rejected[table], Row.of(KafkaReadings.deadLetter(reason, message, payload)));
        deadCount[table].inc();
    }
}
