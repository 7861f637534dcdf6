package pgstore

// InsertsFirst reports whether s begins its next claim batch with a plain
// INSERT (see TxStore.firsts), for the tests of package pgstore_test.
func InsertsFirst(s *TxStore) bool { return s.firsts.ReadFirst() }
