// One model of a dbt-logstore project as a dbt run left it. Run it with Kafka's own jars:
//   java -cp '<kafka>/libs/*' RunCut.java <bootstrap servers> <run topic> <model> [<invocation>]
// It prints the model's records up to the run record's end offsets: each value, one a line.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class RunCut {
    public static void main(String[] args) throws Exception {
        if (args.length < 3 || args.length > 4) {
            System.err.println("usage: RunCut <servers> <run topic> <model> [<invocation id>]");
            System.exit(2);
        }
        String runTopic = args[1], model = args[2];
        String invocation = args.length == 4 ? args[3] : null;  // none: the latest run
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("isolation.level", "read_committed");  // committed transactions only
        props.put("enable.auto.commit", "false");         // no group: partitions assigned
        props.put("auto.offset.reset", "none");           // a log that lost its start fails
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(
                props, new StringDeserializer(), new StringDeserializer())) {
            // 1. the run record: the run topic's last (one partition), or the invocation's
            TopicPartition runs = new TopicPartition(runTopic, 0);
            String[] record = {null};
            read(consumer, consumer.endOffsets(List.of(runs)), r -> {
                if (invocation == null || invocation.equals(r.key())) record[0] = r.value();
            });
            if (record[0] == null) {
                throw new IllegalStateException("no run record in " + runTopic
                    + (invocation == null ? "" : " of invocation " + invocation));
            }
            JsonNode at = null;  // models: unique id -> the model as the run ended
            for (var m : new ObjectMapper().readTree(record[0]).get("models").properties()) {
                if (model.equals(m.getKey()) || model.equals(m.getValue().path("name").asText())) {
                    at = m.getValue();
                }
            }
            if (at == null || !at.hasNonNull("topic")) {
                throw new IllegalStateException("the run record names no logged model " + model);
            }
            // 2. the model's topic, from offset 0 to the record's end offsets (exclusive)
            String topic = at.get("topic").asText();
            Map<TopicPartition, Long> stops = new HashMap<>();
            for (var end : at.path("end_offsets").properties()) {
                stops.put(new TopicPartition(topic, Integer.parseInt(end.getKey())),
                          end.getValue().asLong());
            }
            read(consumer, stops, r -> System.out.println(r.value() == null ? "null" : r.value()));
        }
    }

    // Each partition's committed records from offset 0 up to its stop (exclusive), in order.
    static void read(KafkaConsumer<String, String> consumer, Map<TopicPartition, Long> stops,
                     Consumer<ConsumerRecord<String, String>> action) {
        Map<TopicPartition, Long> left = new HashMap<>(stops);
        left.values().removeIf(stop -> stop <= 0);  // an empty partition: nothing to read
        consumer.assign(left.keySet());
        left.keySet().forEach(tp -> consumer.seek(tp, 0));
        while (!left.isEmpty()) {
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofSeconds(1))) {
                Long stop = left.get(new TopicPartition(r.topic(), r.partition()));
                if (stop != null && r.offset() < stop) {
                    action.accept(r);
                }
            }
            // the position also passes transaction markers: a partition is done at its stop
            left.keySet().removeIf(tp -> consumer.position(tp) >= left.get(tp));
        }
        consumer.assign(List.of());
    }
}
