<?php

// The package's PSR-4 autoloader (ApprovalResume\ => src/), the same mapping composer.json declares, for hosts
// that do not use Composer: `require __DIR__ . '/path/to/clients/php/autoload.php';`.

declare(strict_types=1);

spl_autoload_register(static function (string $class): void {
    $prefix = 'ApprovalResume\\';
    if (!str_starts_with($class, $prefix)) {
        return;
    }
    $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    if (is_file($file)) {
        require $file;
    }
});
