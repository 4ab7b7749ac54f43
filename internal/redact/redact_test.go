package redact

import "testing"

func TestURLs(t *testing.T) {
	cases := []struct{ in, want string }{
		// Nothing to hide: unchanged, to the byte.
		{"", ""},
		{"nats://localhost:4222", "nats://localhost:4222"},
		{"file:///var/lib/hyperplane", "file:///var/lib/hyperplane"},
		{"mem://", "mem://"},
		{"k1:9092", "k1:9092"},
		{"nats://a:4222, nats://b:4222", "nats://a:4222, nats://b:4222"},
		{"s3://models/prod?region=eu-west-1&endpoint=http://minio:9000&use_path_style=true",
			"s3://models/prod?region=eu-west-1&endpoint=http://minio:9000&use_path_style=true"},
		// User info: the password, or a lone token, whole.
		{"nats://alice:s3cret@n:4222", "nats://alice:[redacted]@n:4222"},
		{"nats://tok@n:4222", "nats://[redacted]@n:4222"},
		{"nats://a:4222,nats://bob:s3cret@b:4222", "nats://a:4222,nats://bob:[redacted]@b:4222"},
		{"alice:s3cret@k:9092", "alice:[redacted]@k:9092"},
		{"nats://alice:p@ss@n", "nats://alice:[redacted]@n"},
		// The query: unknown parameters whole, known ones' URLs.
		{"s3://b/p?region=eu&token=s3cret", "s3://b/p?region=eu&[redacted]"},
		{"s3://b?s3cret", "s3://b?[redacted]"},
		{"s3://b?endpoint=http://alice:s3cret@minio:9000", "s3://b?endpoint=http://alice:[redacted]@minio:9000"},
		{"s3://b?endpoint=http%3A%2F%2Falice%3As3cret%40minio", "s3://b?endpoint=http://alice:[redacted]@minio"},
		{"s3://b?token=a,s3cret", "s3://b?[redacted],[redacted]"},
		{"nats://n#s3cret", "nats://n#[redacted]"},
		// A password that net/url splits elsewhere: '/', '?', '#', ','.
		{"nats://alice:pa/s3cret@n", "nats://[redacted]/[redacted]"},
		{"nats://alice:pa?s3cret@n", "nats://[redacted]?[redacted]"},
		{"nats://alice:pa#s3cret@n", "nats://[redacted]#[redacted]"},
		{"nats://alice:pa,s3cret@n", "nats://[redacted],[redacted]@n"},
		{"nats://alice:p,a:s3cret@n", "nats://[redacted],[redacted]@n"},
		// It does not need to parse.
		{"nats://alice:s3cret@n:port", "nats://alice:[redacted]@n:port"},
		{"nats://al%zzice:s3cret@n", "nats://al%zzice:[redacted]@n"},
	}
	for _, c := range cases {
		if got := URLs(c.in); got != c.want {
			t.Errorf("URLs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
