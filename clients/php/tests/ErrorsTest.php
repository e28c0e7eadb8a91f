<?php

declare(strict_types=1);

namespace ApprovalResume\Tests;

use ApprovalResume\ApiException;
use ApprovalResume\Client;
use ApprovalResume\Http\Response;
use ApprovalResume\Tests\Support\Process;
use ApprovalResume\TransportException;
use PHPUnit\Framework\TestCase;

/** How answers that are not successes become exceptions. */
final class ErrorsTest extends TestCase
{
    public function test_a_503_problem_carries_its_code_request_id_and_retry_after(): void
    {
        $error = ApiException::fromResponse(new Response(503, [
            'content-type' => 'application/problem+json',
            'retry-after' => '2',
            'x-request-id' => 'from-the-header',
        ], json_encode([
            'type' => 'urn:approval-resume:problem:database_unavailable',
            'title' => 'Service Unavailable',
            'status' => 503,
            'detail' => 'the database is unavailable; retry after the time in Retry-After',
            'code' => 'database_unavailable',
            'request_id' => '6a1f0e4c-1111-4222-8333-944445555666',
        ])));

        self::assertSame(503, $error->status);
        self::assertSame(503, $error->getCode());
        self::assertSame('database_unavailable', $error->problemCode);
        self::assertSame('the database is unavailable; retry after the time in Retry-After', $error->detail);
        self::assertSame('6a1f0e4c-1111-4222-8333-944445555666', $error->requestId, 'the body\'s request id');
        self::assertSame(2, $error->retryAfterSecs);
        self::assertSame('urn:approval-resume:problem:database_unavailable', $error->type);
    }

    public function test_an_answer_that_is_no_problem_document_is_named_by_its_status_and_type_never_its_body(): void
    {
        $error = ApiException::fromResponse(new Response(502, [
            'content-type' => 'text/html; charset=utf-8',
            'x-request-id' => 'proxy-id',
            'retry-after' => 'Wed, 21 Oct 2015 07:28:00 GMT',
        ], '<html>secret upstream page</html>'));

        self::assertSame('unexpected_response', $error->problemCode);
        self::assertStringNotContainsString('secret', $error->getMessage());
        self::assertStringContainsString('text/html', $error->detail);
        self::assertSame('proxy-id', $error->requestId);
        self::assertSame(0, $error->retryAfterSecs, 'a date in the past: retry now');
    }

    public function test_a_service_that_does_not_answer_is_a_transport_exception(): void
    {
        $client = new Client('http://127.0.0.1:' . Process::freePort(), 'ar_key');
        $this->expectException(TransportException::class);
        $client->getRun('0b0e9f1e-6a56-4c2b-9a43-3f1f4c1d2a01');
    }
}
