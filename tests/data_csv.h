// The published tables in data/*.csv (the repository's data/ folder) as the tests read them: '#'
// lines are their sources, the first other line names the columns, each row after it a record. Header-only, shared by every test
// folder (include "../data_csv.h").
#pragma once

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace stagecraft::testing_data {

// Each row of data/`name` by column name (a missing file fails the calling test).
inline std::vector<std::map<std::string, std::string>> ReadDataCsv(const std::string& name) {
  std::ifstream in(std::string(STAGECRAFT_SOURCE_DIR) + "/data/" + name);
  EXPECT_TRUE(in.good()) << "data/" << name;
  const auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream s(line);
    for (std::string cell; std::getline(s, cell, ',');) cells.push_back(cell);
    return cells;
  };
  std::vector<std::string> columns;
  std::vector<std::map<std::string, std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (columns.empty()) {
      columns = split(line);
      continue;
    }
    const std::vector<std::string> cells = split(line);
    EXPECT_EQ(cells.size(), columns.size()) << "data/" << name << ": " << line;
    std::map<std::string, std::string> row;
    for (size_t k = 0; k < cells.size() && k < columns.size(); ++k) row[columns[k]] = cells[k];
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace stagecraft::testing_data
