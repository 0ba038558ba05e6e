import Testing
@testable import DownloaderEngine

/// What start-up may say of `--cluster-db`: never its password, as read or as written.
@Suite struct ConnectionAddressTests {
    @Test func aStringLibpqCannotReadIsRefusedWithoutQuotingIt() {
        for url in [#"postgres://alice:S3cretPW@[::1/db"#, "postgres://alice:S3c%zzretPW@db/ds"] {
            #expect(!ConnectionAddress(url).parses)
            do {
                _ = try ClusterDatabase.connect(url: url, poolSize: 2, within: 0.1)
                Issue.record("connected to \(url)")
            } catch {
                #expect(error.description.contains("cannot be parsed") && !error.description.contains("S3c"), "\(error)")
            }
        }
    }

    @Test func thePasswordIsTakenOutAsReadAndAsWritten() {
        let address = ConnectionAddress("postgres://alice:S3c%41retPW@db.internal:6432/ds")
        #expect(address.parses && address.display == "db.internal:6432/ds")
        let message = #"could not connect: "postgres://alice:S3c%41retPW@db.internal" or S3cAretPW"#
        #expect(address.redact(message) == #"could not connect: "postgres://alice:***@db.internal" or ***"#)
        #expect(ConnectionAddress("host=db password=pw1 dbname=ds").redact("bad pw1") == "bad ***")
    }
}
