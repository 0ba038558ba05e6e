import Testing
@testable import DownloaderEngine

@Suite struct FileNameSanitizerTests {
    @Test(arguments: [
        ("report.pdf", "report.pdf"), ("../../etc/passwd", "_._etc_passwd"), ("a/b\\c", "a_b_c"),
        ("..", "download"), ("", "download"), (".hidden", "hidden"), ("a\u{0}b\u{1f}c\u{7f}", "abc"),
        ("  spaced  ", "spaced"), ("x:y*z?.txt", "x_y_z_.txt"), ("€ rates.txt", "€ rates.txt"),
        ("...", "download"), ("invoice\u{202E}fdp.exe", "invoicefdp.exe"), ("a\u{200B}b\u{FEFF}\u{2066}c", "abc"),
        ("\u{200F}", "download"), ("日本語.txt", "日本語.txt"),
        (". .bashrc", "bashrc"), (" .. .profile", "profile"), (" . . ", "download"), (". \u{200B}.ssh", "ssh"),
    ])
    func sanitises(_ raw: String, _ expected: String) {
        #expect(FileNameSanitizer.sanitize(raw) == expected)
    }

    @Test func boundsLengthKeepingExtension() {
        let name = FileNameSanitizer.sanitize(String(repeating: "a", count: 500) + ".tar.gz")
        #expect(name.utf8.count <= FileNameSanitizer.maxBytes)
        #expect(name.hasSuffix(".gz"))
        // Characters of many bytes (a letter with 150 combining accents): bounded in bytes, never
        // only its extension.
        let marks = "x.a" + String(repeating: "\u{301}", count: 150)
        for raw in [marks, String(repeating: "é", count: 300) + ".t" + String(repeating: "\u{301}", count: 20)] {
            let bounded = FileNameSanitizer.sanitize(raw)
            #expect(bounded.utf8.count <= FileNameSanitizer.maxBytes && !bounded.hasPrefix("."), "\(bounded.utf8.count)")
        }
    }

    @Test(arguments: [
        ("attachment; filename=\"plain.txt\"", "http://h/x/y.bin", "plain.txt"),
        ("attachment; filename*=UTF-8''%e2%82%ac%20rates.txt; filename=\"fallback.txt\"", "http://h/", "€ rates.txt"),
        ("attachment; filename=\"fallback.txt\"; filename*=UTF-8''better.txt", "http://h/", "better.txt"),
        ("attachment; filename=\"../../evil.sh\"", "http://h/", "_._evil.sh"),
        ("inline", "http://h/dir/file%20name.iso?x=1#f", "file name.iso"),
        (nil, "http://h/dir/archive.tar.gz", "archive.tar.gz"),
        (nil, "http://h/", "download"),
        (nil, "http://h/dir/%2e%2e", "download"),
    ] as [(String?, String, String)])
    func picksName(_ disposition: String?, _ url: String, _ expected: String) {
        #expect(FileNameSanitizer.fileName(contentDisposition: disposition, url: url) == expected)
    }
}
