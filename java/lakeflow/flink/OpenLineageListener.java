package lakeflow.flink;

import java.io.IOException;
import java.io.Writer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermission;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executor;

import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobExecutionStatusEvent;
import org.apache.flink.core.execution.JobStatusChangedEvent;
import org.apache.flink.core.execution.JobStatusChangedListener;
import org.apache.flink.core.execution.JobStatusChangedListenerFactory;
import org.apache.flink.streaming.api.lineage.DatasetSchemaFacet;
import org.apache.flink.streaming.api.lineage.DatasetSchemaField;
import org.apache.flink.streaming.api.lineage.LineageDataset;
import org.apache.flink.streaming.api.lineage.LineageDatasetFacet;
import org.apache.flink.streaming.api.lineage.LineageGraph;
import org.apache.flink.streaming.api.lineage.LineageVertex;
import org.apache.flink.streaming.runtime.execution.JobCreatedEvent;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Flink's native lineage (FLIP-314) as OpenLineage run events in lakeflow's lineage store.
 *
 * <p>Enabled by {@code execution.job-status-changed-listeners: lakeflow.flink.OpenLineageListener$Factory}
 * and {@code lakeflow.lineage.dir} (a folder: one file per event, written atomically, named as
 * {@code lakeflow.lineage.store} names them, readable by the owner's group unless
 * {@code lakeflow.lineage.file-mode} says otherwise) and/or {@code lakeflow.lineage.url} (an OpenLineage
 * HTTP endpoint, e.g. Marquez {@code http://host:5000/api/v1/lineage}; with the environment variable
 * {@code OPENLINEAGE_API_KEY} set — in the client's and the JobManager's environment, never in the
 * configuration — each POST carries {@code Authorization: Bearer <key>}, as OpenLineage's own HTTP
 * transport sends it). A POST refused with 429 or 5xx, or failing to connect, is tried again twice,
 * after 0.5 s and 1 s.
 *
 * <ul>
 *   <li>{@link JobCreatedEvent} (the client, once the job is submitted; it carries the job's
 *       {@link LineageGraph}): a {@code START} event with the sources' datasets as inputs and the
 *       sinks' as outputs.
 *   <li>{@link JobExecutionStatusEvent} to FINISHED / FAILED / CANCELED (the JobManager; no
 *       lineage graph there): {@code COMPLETE} / {@code FAIL} (with an {@code errorMessage}) /
 *       {@code ABORT}, without datasets: OpenLineage consumers merge a run's events by run id.
 * </ul>
 *
 * <p>The run id is the Flink job id as a UUID; the job is {@code flink} / the job's name, as
 * {@code lakeflow harvest} names it. Dataset facets: a {@link DatasetSchemaFacet} becomes
 * OpenLineage's {@code schema}, lakeflow's {@link TableLineage.TableFacet} becomes
 * {@code lakeflow_table} plus the catalog identity in {@code symlinks}; others are left out (a
 * connector's facets may hold its properties, secrets included). A SQL table is named by what it is
 * ({@link SqlTableLineage}), with its Flink identifier in {@code symlinks} ({@code flink-catalog}
 * for a persistent catalog's table, else {@code flink-job}: a name only the job's own session knew)
 * and in {@code lakeflow_flink_table} (identifier, scope, connector, a Kafka topic pattern).
 * A failure to write is logged, never thrown: lineage must not fail a job.
 */
public final class OpenLineageListener implements JobStatusChangedListener {

    public static final ConfigOption<String> DIR = ConfigOptions.key("lakeflow.lineage.dir")
            .stringType().noDefaultValue()
            .withDescription("Folder of lakeflow's lineage store: one OpenLineage run event per file.");
    public static final ConfigOption<String> URL = ConfigOptions.key("lakeflow.lineage.url")
            .stringType().noDefaultValue()
            .withDescription("OpenLineage HTTP endpoint each event is POSTed to.");
    public static final ConfigOption<String> FILE_MODE = ConfigOptions.key("lakeflow.lineage.file-mode")
            .stringType().defaultValue("0640")
            .withDescription("Permissions of each event file, in octal (default 0640: the owner's group reads it).");
    /** Environment variable holding the endpoint's API key (OpenLineage's name for it). */
    static final String API_KEY_ENV = "OPENLINEAGE_API_KEY";
    static final int ATTEMPTS = 3;
    static final long FIRST_BACKOFF_MS = 500;
    /** The jobs' OpenLineage namespace: the harvest's, by which it tells these runs from others. */
    static final String JOB_NAMESPACE = "flink";

    static final String PRODUCER = "https://github.com/lakeflow/lakeflow/tree/v0.1.0";
    static final String FACETS = PRODUCER + "/docs/openlineage";
    static final String SPEC = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent";
    static final String JOB_TYPE = "https://openlineage.io/spec/facets/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet";
    static final String ERROR = "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet";
    static final String SCHEMA = "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet";
    static final String SYMLINKS = "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet";
    static final String TABLE = FACETS + "/LakeflowTableDatasetFacet.json#/$defs/LakeflowTableDatasetFacet";
    static final String FLINK_TABLE = FACETS
            + "/LakeflowFlinkTableDatasetFacet.json#/$defs/LakeflowFlinkTableDatasetFacet";

    private static final Logger LOG = LoggerFactory.getLogger(OpenLineageListener.class);
    /** Always three fractional digits: ISO_INSTANT drops ".000", and its whole seconds would then sort after
     * every other event of that second in the store's file names. */
    public static final DateTimeFormatter EVENT_TIME = DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSSX")
            .withZone(ZoneOffset.UTC);

    private final Path dir;
    private final Set<PosixFilePermission> fileMode;
    private final URI url;
    private final String apiKey;
    private final Executor executor;

    OpenLineageListener(Path dir, Set<PosixFilePermission> fileMode, URI url, String apiKey, Executor executor) {
        this.dir = dir;
        this.fileMode = fileMode;
        this.url = url;
        this.apiKey = apiKey == null || apiKey.isEmpty() ? null : apiKey;
        this.executor = executor;
    }

    /** Creates the listener from the Flink configuration ({@code lakeflow.lineage.*}). */
    public static final class Factory implements JobStatusChangedListenerFactory {
        @Override
        public JobStatusChangedListener createListener(Context context) {
            Configuration conf = context.getConfiguration();
            String dir = conf.get(DIR);
            String url = conf.get(URL);
            if (dir == null && url == null) {
                LOG.warn("OpenLineageListener: neither {} nor {} is set: no lineage is written",
                        DIR.key(), URL.key());
            }
            return new OpenLineageListener(dir == null ? null : Paths.get(dir), permissions(conf.get(FILE_MODE)),
                    url == null ? null : URI.create(url), System.getenv(API_KEY_ENV), context.getIOExecutor());
        }
    }

    /** The permissions an octal mode ({@code 0640}) gives; an invalid one is logged and the default used. */
    public static Set<PosixFilePermission> permissions(String octal) {
        int mode;
        try {
            mode = Integer.parseInt(octal.trim(), 8);
        } catch (NumberFormatException e) {
            mode = -1;
        }
        if (mode < 0 || mode > 0777) {
            LOG.warn("OpenLineageListener: {} '{}' is no octal file mode: {} used", FILE_MODE.key(), octal,
                    FILE_MODE.defaultValue());
            mode = Integer.parseInt(FILE_MODE.defaultValue(), 8);
        }
        Set<PosixFilePermission> permissions = EnumSet.noneOf(PosixFilePermission.class);
        PosixFilePermission[] bits = PosixFilePermission.values();  // OWNER_READ … OTHERS_EXECUTE: 0400 … 0001
        for (int i = 0; i < bits.length; i++) {
            if ((mode & (0400 >> i)) != 0) {
                permissions.add(bits[i]);
            }
        }
        return permissions;
    }

    @Override
    public void onEvent(JobStatusChangedEvent event) {
        String json;
        String type;
        try {
            String runId = runId(event.jobId().toHexString());
            String now = EVENT_TIME.format(Instant.now());
            if (event instanceof JobCreatedEvent) {
                JobCreatedEvent created = (JobCreatedEvent) event;
                type = "START";
                json = runEvent(type, now, runId, event.jobName(),
                        created.executionMode() == RuntimeExecutionMode.BATCH ? "BATCH" : "STREAMING",
                        created.lineageGraph(), null);
            } else if (event instanceof JobExecutionStatusEvent) {
                JobExecutionStatusEvent status = (JobExecutionStatusEvent) event;
                type = terminal(status.newStatus());
                if (type == null) {
                    return;
                }
                json = runEvent(type, now, runId, event.jobName(), null, null, status.exception());
            } else {
                return;
            }
            String file = now.replaceAll("[^0-9TZ]", "") + "-" + runId + "-" + type + ".json";
            if (event instanceof JobCreatedEvent) {
                emit(file, json);  // before the client's submission completes: it may exit right after
            } else {
                executor.execute(() -> emit(file, json));  // off the JobManager's main thread
            }
        } catch (RuntimeException e) {
            LOG.warn("OpenLineageListener: could not build the event of job {}", event.jobId(), e);
        }
    }

    static String terminal(JobStatus status) {
        switch (status) {
            case FINISHED: return "COMPLETE";
            case FAILED: return "FAIL";
            case CANCELED: return "ABORT";
            default: return null;
        }
    }

    /** A Flink job id (32 hex digits) as a UUID, the form OpenLineage run ids take. */
    static String runId(String hex) {
        return hex.substring(0, 8) + "-" + hex.substring(8, 12) + "-" + hex.substring(12, 16) + "-"
                + hex.substring(16, 20) + "-" + hex.substring(20);
    }

    private void emit(String file, String json) {
        if (dir != null) {
            try {
                Files.createDirectories(dir);
                Path tmp = Files.createTempFile(dir, ".", ".tmp");
                try {
                    Files.setPosixFilePermissions(tmp, fileMode);
                } catch (UnsupportedOperationException e) {
                    // not a POSIX file system: its own defaults
                }
                try (Writer w = Files.newBufferedWriter(tmp, StandardCharsets.UTF_8)) {
                    w.write(json);
                }
                Files.move(tmp, dir.resolve(file), StandardCopyOption.ATOMIC_MOVE);
            } catch (IOException | RuntimeException e) {
                LOG.warn("OpenLineageListener: could not write {} into {}: {}", file, dir, e.toString());
            }
        }
        if (url != null) {
            post(json);
        }
    }

    /** POSTs {@code json} to the endpoint: up to {@link #ATTEMPTS} times while the answer is 429 or 5xx
     * or the connection fails; a last failure is logged (the URL without its query, never the key). */
    private void post(String json) {
        HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
        HttpRequest.Builder request = HttpRequest.newBuilder(url).timeout(Duration.ofSeconds(30))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(json));
        if (apiKey != null) {
            request.header("Authorization", "Bearer " + apiKey);
        }
        String problem = null;
        for (int attempt = 1; attempt <= ATTEMPTS; attempt++) {
            try {
                if (attempt > 1) {
                    Thread.sleep(FIRST_BACKOFF_MS << (attempt - 2));
                }
                HttpResponse<String> r = client.send(request.build(), HttpResponse.BodyHandlers.ofString());
                int status = r.statusCode();
                if (status / 100 == 2) {
                    return;
                }
                problem = "HTTP " + status;
                if (status != 429 && status / 100 != 5) {
                    break;
                }
            } catch (IOException e) {
                problem = e.getClass().getSimpleName();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
        LOG.warn("OpenLineageListener: POST {}: {}", redact(url), problem);
    }

    private static String redact(URI uri) {
        return uri.getScheme() + "://" + uri.getHost() + (uri.getPort() < 0 ? "" : ":" + uri.getPort()) + uri.getPath();
    }

    String runEvent(String type, String time, String runId, String jobName, String processing,
            LineageGraph graph, Throwable failure) {
        Json j = new Json().open('{');
        j.key("eventType").string(type).key("eventTime").string(time);
        j.key("producer").string(PRODUCER).key("schemaURL").string(SPEC);
        j.key("run").open('{').key("runId").string(runId).key("facets").open('{');
        if (failure != null) {
            Throwable root = failure;
            while (root.getCause() != null && root.getCause() != root) {
                root = root.getCause();
            }
            String message = String.valueOf(root);
            j.key("errorMessage").open('{').facet(ERROR)
                    .key("message").string(message.length() > 2000 ? message.substring(0, 2000) : message)
                    .key("programmingLanguage").string("JAVA").close('}');
        }
        j.close('}').close('}');
        j.key("job").open('{').key("namespace").string(JOB_NAMESPACE).key("name").string(jobName)
                .key("facets").open('{');
        if (processing != null) {
            j.key("jobType").open('{').facet(JOB_TYPE).key("processingType").string(processing)
                    .key("integration").string("FLINK").key("jobType").string("JOB").close('}');
        }
        j.close('}').close('}');
        List<LineageVertex> sources = new ArrayList<>();
        List<LineageVertex> sinks = new ArrayList<>();
        if (graph != null) {
            sources.addAll(graph.sources());
            sinks.addAll(graph.sinks());
        }
        datasets(j.key("inputs"), sources);
        datasets(j.key("outputs"), sinks);
        return j.close('}').toString();
    }

    private static void datasets(Json j, List<LineageVertex> vertices) {
        j.open('[');
        for (LineageVertex v : vertices) {
            for (LineageDataset d : v.datasets()) {
                SqlTableLineage table = SqlTableLineage.of(d);
                if (table == null) {
                    j.open('{').key("namespace").string(d.namespace()).key("name").string(d.name());
                    j.key("facets").open('{');
                    for (LineageDatasetFacet f : d.facets().values()) {
                        facet(j, f);
                    }
                    j.close('}').close('}');
                } else if (table.datasets().isEmpty()) {
                    tableDataset(j, "", table.identifier(), table, d);  // Flink's own name: the harvest resolves it
                } else {
                    for (String[] id : table.datasets()) {
                        tableDataset(j, id[0], id[1], table, d);
                    }
                }
            }
        }
        j.close(']');
    }

    /** One dataset of a SQL table: its schema (when Flink gives one), its identifier in {@code symlinks}
     * and {@code lakeflow_flink_table}. */
    private static void tableDataset(Json j, String namespace, String name, SqlTableLineage table, LineageDataset d) {
        j.open('{').key("namespace").string(namespace).key("name").string(name).key("facets").open('{');
        for (LineageDatasetFacet f : d.facets().values()) {
            if (f instanceof DatasetSchemaFacet) {
                facet(j, f);
            }
        }
        String scope = table.kind().equals(SqlTableLineage.CATALOG) ? "flink-catalog" : "flink-job";
        j.key("symlinks").open('{').facet(SYMLINKS).key("identifiers").open('[').open('{')
                .key("namespace").string(scope).key("name").string(table.identifier()).key("type").string("TABLE")
                .close('}').close(']').close('}');
        j.key(SqlTableLineage.FACET).open('{').facet(FLINK_TABLE).key("identifier").string(table.identifier())
                .key("kind").string(table.kind()).key("connector").string(table.connector());
        if (table.topicPattern() != null) {
            j.key("topicPattern").string(table.topicPattern());
        }
        j.close('}').close('}').close('}');
    }

    private static void facet(Json j, LineageDatasetFacet f) {
        if (f instanceof DatasetSchemaFacet) {
            j.key("schema").open('{').facet(SCHEMA).key("fields").open('[');
            Map<String, DatasetSchemaField<Object>> fields = ((DatasetSchemaFacet) f).fields();
            for (DatasetSchemaField<Object> field : fields.values()) {
                j.open('{').key("name").string(field.name());
                if (field.type() != null) {
                    j.key("type").string(String.valueOf(field.type()));
                }
                j.close('}');
            }
            j.close(']').close('}');
        } else if (f instanceof TableLineage.TableFacet) {
            TableLineage.TableFacet t = (TableLineage.TableFacet) f;
            j.key(TableLineage.TableFacet.NAME).open('{').facet(TABLE)
                    .key("catalog").string(t.catalog).key("catalogUri").string(t.catalogUri)
                    .key("warehouse").string(t.warehouse).key("namespace").string(t.namespace)
                    .key("table").string(t.table).close('}');
            j.key("symlinks").open('{').facet(SYMLINKS).key("identifiers").open('[').open('{')
                    .key("namespace").string(t.catalogUri.replaceAll("/+$", "") + "/" + t.warehouse)
                    .key("name").string(t.namespace + "." + t.table).key("type").string("TABLE")
                    .close('}').close(']').close('}');
        }
    }

    /** A minimal JSON writer: commas between members and elements, strings escaped. */
    static final class Json {
        private final StringBuilder out = new StringBuilder();
        private boolean first = true;

        Json open(char bracket) {
            comma();
            out.append(bracket);
            first = true;
            return this;
        }

        Json close(char bracket) {
            out.append(bracket);
            first = false;
            return this;
        }

        Json key(String key) {
            comma();
            quote(key);
            out.append(':');
            first = true;
            return this;
        }

        Json string(String value) {
            comma();
            if (value == null) {
                out.append("null");
            } else {
                quote(value);
            }
            first = false;
            return this;
        }

        Json facet(String schemaUrl) {
            return key("_producer").string(PRODUCER).key("_schemaURL").string(schemaUrl);
        }

        private void comma() {
            if (!first) {
                out.append(',');
            }
            first = false;
        }

        private void quote(String s) {
            out.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"': out.append("\\\""); break;
                    case '\\': out.append("\\\\"); break;
                    case '\n': out.append("\\n"); break;
                    case '\r': out.append("\\r"); break;
                    case '\t': out.append("\\t"); break;
                    default:
                        if (c < 0x20 || c == 0x2028 || c == 0x2029) {
                            out.append(String.format("\\u%04x", (int) c));
                        } else {
                            out.append(c);
                        }
                }
            }
            out.append('"');
        }

        @Override
        public String toString() {
            return out.toString();
        }
    }
}
