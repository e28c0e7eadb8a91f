<?php

// A webhook receiver for `php -S 127.0.0.1:PORT receiver.php`: appends each request it gets to the file named by
// RECEIVED_FILE, one JSON line {"headers": {...}, "body": "..."}, and answers 204. It verifies nothing itself:
// the tests verify what it kept, as received, with WebhookVerifier.

declare(strict_types=1);

$file = getenv('RECEIVED_FILE');
if (!is_string($file) || $file === '') {
    http_response_code(500);
    return;
}
$headers = [];
foreach (getallheaders() as $name => $value) {
    $headers[strtolower($name)] = $value;
}
$line = json_encode(['headers' => $headers, 'body' => file_get_contents('php://input')], JSON_THROW_ON_ERROR) . "\n";
file_put_contents($file, $line, FILE_APPEND | LOCK_EX);
http_response_code(204);
