// A two-turn chat with the JDK's HttpClient and no SDK or instrumentation: it reads
// OPENAI_BASE_URL, which `rewind record --proxy` and the replay point at the proxy
// (tests/test_proxy_record.py). Run with `java tests/java/Agent.java` (Java 17, no build).
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public class Agent {
    private static final Pattern CONTENT =
            Pattern.compile("\"content\"\\s*:\\s*\"((?:[^\"\\\\]|\\\\.)*)\"");
    private static final HttpClient CLIENT =
            HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

    public static void main(String[] args) throws Exception {
        String first = "{\"role\": \"user\", \"content\": \"what is the weather in Paris?\"}";
        String answer = ask(first);
        System.out.println(answer);
        String second = first + ", {\"role\": \"assistant\", \"content\": \"" + quote(answer)
                + "\"}, {\"role\": \"user\", \"content\": \"and tomorrow?\"}";
        System.out.println(ask(second));
    }

    private static String ask(String messages) throws Exception {
        String key = System.getenv().getOrDefault("OPENAI_API_KEY", "sk-x");
        HttpRequest request = HttpRequest.newBuilder()
                .uri(URI.create(System.getenv("OPENAI_BASE_URL") + "/chat/completions"))
                .header("Authorization", "Bearer " + key)
                .header("content-type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(
                        "{\"model\": \"gpt-4o\", \"messages\": [" + messages + "]}"))
                .build();
        HttpResponse<String> response = CLIENT.send(request, HttpResponse.BodyHandlers.ofString());
        Matcher content = CONTENT.matcher(response.body());
        if (response.statusCode() != 200 || !content.find()) {
            System.err.println("HTTP " + response.statusCode() + ": " + response.body());
            System.exit(1);
        }
        return unquote(content.group(1));
    }

    private static String quote(String text) {
        return text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
    }

    private static String unquote(String text) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c != '\\' || i + 1 == text.length()) {
                out.append(c);
                continue;
            }
            char next = text.charAt(++i);
            switch (next) {
                case 'n' -> out.append('\n');
                case 't' -> out.append('\t');
                case 'u' -> {
                    out.append((char) Integer.parseInt(text.substring(i + 1, i + 5), 16));
                    i += 4;
                }
                default -> out.append(next);
            }
        }
        return out.toString();
    }
}
