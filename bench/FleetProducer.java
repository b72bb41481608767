// make bench-fleet's producer (bench/bench_fleet.py): ONE JVM writing to every topic of the fleet, where
// Kafka's console producer takes one topic per JVM (50 streams: 50 JVMs). Run from source, no build step:
//   java -cp <Kafka's jars> bench/FleetProducer.java create BOOTSTRAP PARTITIONS TOPIC...
//       creates the topics (Admin; those already there are kept) and exits
//   java -cp <Kafka's jars> bench/FleetProducer.java produce BOOTSTRAP
//       reads "topic<TAB>message" lines from stdin and sends each message to its topic (acks=all,
//       idempotent, linger 5 ms: the console producer's settings in bench/always_on.py); at the end of its
//       input it flushes, prints "sent N failed M" and exits 1 if a send failed.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class FleetProducer {
    public static void main(String[] args) throws Exception {
        if (args.length >= 3 && args[0].equals("create")) {
            create(args[1], Integer.parseInt(args[2]), List.of(args).subList(3, args.length));
        } else if (args.length == 2 && args[0].equals("produce")) {
            System.exit(produce(args[1]));
        } else {
            System.err.println("usage: FleetProducer create BOOTSTRAP PARTITIONS TOPIC... | produce BOOTSTRAP");
            System.exit(2);
        }
    }

    static void create(String bootstrap, int partitions, List<String> topics) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(props)) {
            Set<String> existing = admin.listTopics().names().get();
            List<NewTopic> missing = new ArrayList<>();
            for (String topic : topics) {
                if (!existing.contains(topic)) {
                    missing.add(new NewTopic(topic, partitions, (short) 1));
                }
            }
            admin.createTopics(missing).all().get();
            System.out.println("created " + missing.size() + " topics");
        }
    }

    static int produce(String bootstrap) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("linger.ms", "5");
        props.put("delivery.timeout.ms", "900000");
        props.put("max.block.ms", "900000");
        props.put("request.timeout.ms", "30000");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        AtomicLong failed = new AtomicLong();
        long sent = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16)) {
            String line;
            while ((line = in.readLine()) != null) {
                int tab = line.indexOf('\t');
                if (tab <= 0) {
                    continue;
                }
                producer.send(new ProducerRecord<>(line.substring(0, tab), line.substring(tab + 1).getBytes(StandardCharsets.UTF_8)),
                        (metadata, error) -> {
                            if (error != null && failed.incrementAndGet() <= 5) {
                                System.err.println("send failed: " + error);
                            }
                        });
                sent++;
            }
            producer.flush();
        }
        System.out.println("sent " + sent + " failed " + failed.get());
        return failed.get() == 0 ? 0 : 1;
    }
}
